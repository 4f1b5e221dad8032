// Import of a Hugging Face transformers config.json into a ModelConfig, so users can point Strata
// at the config of the model they train. Used by the model loader and `strata validate`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "strata/schemas/json_location.h"
#include "strata/schemas/model_config.h"

namespace strata::schemas {

// Supports LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (with its q/k/v biases),
// Qwen3ForCausalLM (query/key norms), GPT2LMHeadModel (n_embd/n_layer/n_head/n_inner) and the
// mixtures of experts MixtralForCausalLM, Qwen2MoeForCausalLM (a gated shared expert),
// Qwen3MoeForCausalLM and DeepseekV3ForCausalLM (latent attention, dense first layers, shared
// experts, group-limited sigmoid routing; its multi-token-prediction layers are not part of the
// model Strata counts, as in DeepSeek's 671 B). Keys transformers fills in by default may be
// absent or null (num_key_value_heads, head_dim, n_inner); other keys of the config are ignored,
// since configs carry many that do not change the model's shape. The model is named after
// "_name_or_path" when the config has one, else `fallback_name`.
ModelConfig import_hf_config(const nlohmann::json& config, const JsonLocation& location,
                             const std::string& fallback_name);

}  // namespace strata::schemas
