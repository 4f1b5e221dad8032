// ModelConfig: the model file format (kind "model") — a decoder-only transformer's shape.
// Read by every component: cost models size it, the planner splits it, the executor builds it.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "strata/schemas/dtype.h"
#include "strata/schemas/enum_names.h"
#include "strata/schemas/json_location.h"
#include "strata/schemas/mla_config.h"
#include "strata/schemas/moe_config.h"
#include "strata/schemas/multi_token_prediction.h"
#include "strata/schemas/sliding_window.h"

namespace strata::schemas {

// gpt:   learned positions, LayerNorm, GELU MLP (4h), biases everywhere (GPT-2/GPT-3/Megatron).
// llama: rotary positions, RMSNorm, SwiGLU MLP, grouped-query attention, no biases.
// The per-feature fields below default from the architecture and may override it (BLOOM is a
// gpt with ALiBi and an embedding LayerNorm; Qwen2 is a llama with q/k/v biases).
enum class Architecture { gpt, llama };
enum class PositionEmbedding { learned, rope, alibi, none };
// clamped_swiglu: GPT-OSS's gated unit, (clamp(up, ±limit) + 1) · g·σ(α·g) with
// g = min(gate, limit).
enum class MlpActivation { gelu, swiglu, squared_relu, clamped_swiglu };
enum class NormKind { layernorm, rmsnorm };

inline constexpr std::array<EnumName<Architecture>, 2> kArchitectureNames{
    {{Architecture::gpt, "gpt"}, {Architecture::llama, "llama"}}};
inline constexpr std::array<EnumName<PositionEmbedding>, 4> kPositionEmbeddingNames{
    {{PositionEmbedding::learned, "learned"},
     {PositionEmbedding::rope, "rope"},
     {PositionEmbedding::alibi, "alibi"},
     {PositionEmbedding::none, "none"}}};
inline constexpr std::array<EnumName<MlpActivation>, 4> kMlpActivationNames{
    {{MlpActivation::gelu, "gelu"},
     {MlpActivation::swiglu, "swiglu"},
     {MlpActivation::squared_relu, "squared_relu"},
     {MlpActivation::clamped_swiglu, "clamped_swiglu"}}};

// Gated units have two input projections (gate and up) of the MLP's width; the others one.
inline bool is_gated(MlpActivation activation) {
  return activation == MlpActivation::swiglu || activation == MlpActivation::clamped_swiglu;
}
inline constexpr std::array<EnumName<NormKind>, 2> kNormKindNames{
    {{NormKind::layernorm, "layernorm"}, {NormKind::rmsnorm, "rmsnorm"}}};

// Bounds that keep every derived count (parameters, FLOPs, bytes) far inside int64.
inline constexpr std::int64_t kMaxLayers = 4096;
inline constexpr std::int64_t kMaxHiddenSize = 1 << 20;
inline constexpr std::int64_t kMaxHeads = 1 << 14;
inline constexpr std::int64_t kMaxVocabSize = 1 << 24;
inline constexpr std::int64_t kMaxSeqLength = 1 << 24;
inline constexpr std::int64_t kMaxExpertsWidth = 1 << 26;  // experts × their MLP width

inline constexpr int kModelSchemaVersion = 1;

struct ModelConfig {
  std::string name;
  std::optional<std::string> description;
  Architecture architecture = Architecture::gpt;
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t ffn_hidden_size = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_seq_length = 0;
  bool tied_embeddings = true;
  PositionEmbedding position_embedding = PositionEmbedding::learned;
  NormKind norm = NormKind::layernorm;
  MlpActivation mlp_activation = MlpActivation::gelu;
  bool qkv_bias = true;               // biases of the q, k and v projections
  bool attention_output_bias = true;  // bias of the attention output projection
  bool mlp_bias = true;
  bool embedding_norm = false;  // a norm right after the token embedding (BLOOM)
  bool qk_norm = false;         // a norm over each head's query and key (Qwen3, OLMo 2)
  // A learned logit per head and layer that joins every query's softmax as a key without a value
  // (GPT-OSS's attention sinks): it lets a head attend to nothing.
  bool attention_sinks = false;
  // clamped_swiglu's limit and α (GPT-OSS: 7 and 1.702); other activations ignore them.
  double swiglu_limit = 7.0;
  double swiglu_alpha = 1.702;
  double dropout = 0.0;  // hidden and attention dropout probability
  double norm_epsilon = 1e-5;
  std::optional<double> rope_theta;       // rotary base; set iff position_embedding is rope
  std::optional<Dtype> checkpoint_dtype;  // dtype of the published weights, if known
  // Mixture-of-experts MLPs on the layers the block names (the others keep the dense MLP of
  // ffn_hidden_size); absent: every layer is dense.
  std::optional<MoeConfig> moe;
  // Multi-head latent attention instead of (grouped-query) multi-head attention; head_dim is
  // then qk_nope_head_dim + qk_rope_head_dim and every head has its own key and value.
  std::optional<MlaConfig> mla;
  // Sliding-window attention on the layers the block names; absent: every layer attends fully.
  std::optional<SlidingWindow> sliding_window;
  // Multi-token prediction modules after the main model (DeepSeek-V3); absent: none.
  std::optional<MultiTokenPrediction> mtp;

  // The architecture's defaults for every per-feature field (with rope_theta 10000 for llama).
  static ModelConfig defaults_for(Architecture architecture);

  std::int64_t attention_width() const { return num_attention_heads * head_dim; }
  std::int64_t kv_width() const { return num_kv_heads * head_dim; }
  std::int64_t mtp_modules() const { return mtp ? mtp->num_modules : 0; }
  // Transformer layers with parameters: the main model's, then one per MTP module (layer
  // num_layers + k − 1 is module k's, as Hugging Face's DeepSeek-V3 checkpoint numbers them).
  std::int64_t layers_with_mtp() const { return num_layers + mtp_modules(); }
  // The main-model layer whose kind (dense or MoE MLP, windowed or full attention) layer `layer`
  // has: itself, or for an MTP module's layer the last layer (Megatron-Core builds the MTP layer
  // from the decoder's last layer spec).
  std::int64_t kind_layer(std::int64_t layer) const {
    return layer < num_layers ? layer : num_layers - 1;
  }
  bool is_moe_layer(std::int64_t layer) const {
    return moe && moe->is_moe_layer(kind_layer(layer));
  }
  // Whether the last pipeline stage also uses the word embedding (a copy when another stage holds
  // it, kept equal by the embedding group's all-reduce): as the tied LM head, or as the MTP
  // modules' shared embedding.
  bool last_stage_uses_word_embedding() const { return tied_embeddings || mtp.has_value(); }
  // Keys a query of layer `layer` sees at most: its window's size, 0 for full causal attention.
  std::int64_t attention_window(std::int64_t layer) const {
    return sliding_window && sliding_window->is_windowed(kind_layer(layer)) ? sliding_window->size
                                                                            : 0;
  }
  bool operator==(const ModelConfig&) const = default;
};

// Parses and validates a model document; errors name `location`'s file and the JSON pointer.
ModelConfig parse_model(const nlohmann::json& document, const JsonLocation& location);
// Writes every field explicitly (defaults included), so that files say what they mean.
nlohmann::json model_to_json(const ModelConfig& model);
// Semantic rules across fields (head and kv-head divisibility, rope needs an even head_dim...).
void validate_model(const ModelConfig& model, const JsonLocation& location);

}  // namespace strata::schemas
