// MoeConfig: a model's mixture-of-experts block (the "moe" object of a model file) — how many
// routed experts each MoE layer holds, how many each token visits, the shared experts every token
// visits, which layers stay dense and how the router scores experts. Counted by costmodels/
// (total and active parameters, FLOPs per token); read by the Hugging Face importer.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "strata/schemas/enum_names.h"
#include "strata/schemas/json_location.h"

namespace strata::schemas {

// softmax: probabilities over all routed experts, the top k kept (Mixtral, Qwen-MoE).
// sigmoid: an independent score per expert (DeepSeek-V3), the top k normalised among themselves.
enum class RouterScoreFunction { softmax, sigmoid };

inline constexpr std::array<EnumName<RouterScoreFunction>, 2> kRouterScoreFunctionNames{
    {{RouterScoreFunction::softmax, "softmax"}, {RouterScoreFunction::sigmoid, "sigmoid"}}};

inline constexpr std::int64_t kMaxExperts = 1 << 14;

struct RouterConfig {
  RouterScoreFunction score_function = RouterScoreFunction::softmax;
  // Group-limited routing (DeepSeek-V3): the experts fall into `expert_groups` equal groups and
  // each token picks its experts among its best `groups_per_token` groups only, bounding the
  // nodes a token's dispatch reaches. 1 and 1 = no limit.
  std::int64_t expert_groups = 1;
  std::int64_t groups_per_token = 1;
  // A per-expert bias added to the scores for the choice only (DeepSeek-V3's auxiliary-loss-free
  // balancing): num_experts parameters per MoE layer, moved after each step by ±update_rate
  // against each expert's load over the step's tokens (raised where the expert took fewer than
  // the mean, lowered where more), not by a gradient (Megatron-Core's
  // moe_router_bias_update_rate; DeepSeek-V3's γ = 0.001).
  bool expert_bias = false;
  double expert_bias_update_rate = 1e-3;
  // A learned bias on the router's logits (GPT-OSS's router is a Linear with a bias): num_experts
  // parameters per MoE layer, trained by its gradient like any bias, unlike expert_bias.
  bool logit_bias = false;
  bool normalize_top_k = true;        // the k chosen scores rescaled to sum to 1
  double scaling_factor = 1.0;        // the combined expert output's scale (DeepSeek-V3: 2.5)
  double aux_loss_coefficient = 0.0;  // load-balancing loss weight
  double z_loss_coefficient = 0.0;    // router logit z-loss weight
  bool operator==(const RouterConfig&) const = default;
};

struct MoeConfig {
  std::int64_t num_experts = 0;             // routed experts per MoE layer
  std::int64_t experts_per_token = 0;       // top-k
  std::int64_t expert_ffn_hidden_size = 0;  // each routed expert's MLP width (the model's MLP kind)
  std::int64_t num_shared_experts = 0;      // experts every token visits
  std::int64_t shared_expert_ffn_hidden_size = 0;  // each shared expert's width (0 without any)
  bool shared_expert_gate = false;  // Qwen2-MoE: a sigmoid gate (hidden → 1) on the shared output
  // Layer i (from 0) is a MoE layer iff i ≥ first_dense_layers and
  // (i − first_dense_layers + 1) is a multiple of moe_layer_interval; the other layers keep the
  // model's dense MLP of ffn_hidden_size. DeepSeek-V3: 3 and 1; Llama 4 Maverick: 0 and 2.
  std::int64_t first_dense_layers = 0;
  std::int64_t moe_layer_interval = 1;
  RouterConfig router;
  // Tokens an expert takes per batch, as a multiple of its even share (tokens·k / experts);
  // the rest are dropped. Absent: dropless, every routed token is computed.
  std::optional<double> capacity_factor;

  bool is_moe_layer(std::int64_t layer) const {
    return layer >= first_dense_layers &&
           (layer - first_dense_layers + 1) % moe_layer_interval == 0;
  }
  std::int64_t num_moe_layers(std::int64_t num_layers) const {
    return num_layers <= first_dense_layers
               ? 0
               : (num_layers - first_dense_layers) / moe_layer_interval;
  }
  bool operator==(const MoeConfig&) const = default;
};

// Parses the "moe" object at `location` (strict keys, ranges, cross-field rules within it);
// `num_layers` bounds the dense-layer pattern, which must leave at least one MoE layer.
MoeConfig parse_moe(const nlohmann::json& value, const JsonLocation& location,
                    std::int64_t num_layers);
// Checks the rules parse_moe checks, for configs built in code (the HF importer, tests).
void validate_moe(const MoeConfig& moe, const JsonLocation& location, std::int64_t num_layers);
// Every field written, defaults included.
nlohmann::json moe_to_json(const MoeConfig& moe);

}  // namespace strata::schemas
