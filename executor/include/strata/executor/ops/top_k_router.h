// The router of a mixture-of-experts layer: each token's scores over the routed experts, its top-k
// experts and their combine weights, the capacity rule that drops what an expert cannot take, the
// order in which the kept (token, expert) pairs are dispatched, and the router's two auxiliary
// losses (load balancing and z-loss) — forward and backward. CPU backend. Used by model/moe_mlp.h.
//
// Scores: softmax over the experts (Mixtral, Qwen-MoE) or an independent sigmoid per expert
// (DeepSeek-V3). A token's k highest choice keys choose its experts (slot 0 the highest): the
// scores, plus the router's expert bias where it has one (DeepSeek-V3's auxiliary-loss-free
// balancing: the bias steers the choice only). With group-limited routing the experts fall into
// G equal groups, each group's key is the sum of its best ⌊k / groups_per_token⌋ choice keys
// (Megatron-Core's group_limited_topk; DeepSeek-V3's best two), and a token chooses among the
// experts of its groups_per_token best groups only. Ties go to the lower index. The chosen
// scores (without the bias), renormalised to sum to 1 when the config says so and times its
// scaling factor, are the weights that combine the experts' outputs. The choice itself has no
// gradient; the weights do, and so do the auxiliary losses.
//
// Capacity (Switch/GShard style, deterministic): with a capacity factor, expert e takes at most
// C = ⌈factor · tokens · k / experts⌉ pairs, the first C in token order (a token's slots by rank);
// the rest are dropped and contribute nothing, and the other pairs keep their weights.
//
// Auxiliary losses of the micro-batch's tokens:
//   load balancing = α · E · Σ_e f_e · P_e, with f_e the share of the tokens·k choices that went
//   to e (before dropping; a count, no gradient) and P_e the mean over tokens of p[t, e] — the
//   softmax probabilities, or for sigmoid scores the scores normalised per token (Switch
//   Transformer's loss, Megatron-Core's switch_load_balancing_loss);
//   z-loss = β · mean_t (logsumexp_e logits[t, e])² (ST-MoE), which keeps the logits small.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/executor/tensor/tensor.h"
#include "strata/schemas/moe_config.h"

namespace strata::executor {

// One micro-batch's routing: what the forward chose and what the backward needs.
struct TokenRouting {
  std::int64_t tokens = 0, experts = 0, top_k = 0;
  Tensor scores;                     // [tokens, experts]: softmax probabilities or sigmoid scores
  Tensor weights;                    // [tokens, k]: the combine weights, slot 0 the highest score
  std::vector<std::int32_t> expert;  // [tokens · k]: each slot's expert
  std::vector<std::uint8_t> kept;    // [tokens · k]: 0 where the capacity dropped the pair
  // The kept pairs (token · k + slot) grouped by expert, each expert's in token order; expert e's
  // are dispatched[expert_offsets[e] … expert_offsets[e + 1]) — Megatron's token permutation.
  std::vector<std::int64_t> dispatched;
  std::vector<std::int64_t> expert_offsets;     // [experts + 1]
  std::vector<std::int64_t> tokens_per_expert;  // [experts]: choices before dropping
  // The statistic the load-balancing loss takes each expert's share of choices from: these
  // tokens' choices (route_tokens sets them to tokens_per_expert and tokens), or, where one
  // micro-batch's sequences are split over ranks (context parallelism), the sum over those
  // ranks (MoeMlp pools them), so that the loss is the one-rank micro-batch's.
  std::vector<std::int64_t> balance_counts;
  std::int64_t balance_tokens = 0;
  double load_balancing_loss = 0, z_loss = 0;  // their values over these tokens (coefficients
                                               // applied)

  std::int64_t dispatched_count() const { return static_cast<std::int64_t>(dispatched.size()); }
  std::int64_t token_of(std::int64_t row) const { return dispatched[row] / top_k; }
};

// The routing of `logits` [tokens, experts] (the router's linear output) under `moe`;
// `expert_bias` [experts] is the router's bias where moe.router.expert_bias says it has one.
void route_tokens(const Tensor& logits, const schemas::MoeConfig& moe, TokenRouting& routing,
                  const Tensor* expert_bias = nullptr);

// The auxiliary-loss-free balancing step (DeepSeek-V3, Megatron-Core's get_updated_expert_bias):
// each expert's bias moves by +rate where `loads` (each expert's choices over the step's tokens,
// every rank's summed) is below their mean, −rate where above, 0 where equal.
std::vector<double> expert_bias_step(const std::vector<double>& loads, double rate);

// d_logits = ∂/∂logits of (Σ d_weights ⊙ weights + auxiliary_scale · (load balancing + z-loss)),
// overwritten: d_weights [tokens, k] is the gradient of the combine weights, auxiliary_scale the
// weight of this micro-batch's auxiliary losses in the step's objective.
void route_tokens_backward(const Tensor& logits, const TokenRouting& routing,
                           const schemas::MoeConfig& moe, const Tensor& d_weights,
                           double auxiliary_scale, Tensor& d_logits);

}  // namespace strata::executor
