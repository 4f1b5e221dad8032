#include "strata/costmodels/moe_block_costs.h"

#include <algorithm>

#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/gemm_passes.h"
#include "strata/costmodels/kernel_time.h"

namespace strata::costmodels {

MoeTokenCounts moe_token_counts(const LayerContext& context) {
  const schemas::MoeConfig& moe = *context.model->moe;
  MoeTokenCounts counts;
  counts.block_tokens = context.norm_tokens();
  counts.routed = counts.block_tokens * static_cast<double>(moe.experts_per_token);
  counts.imbalance = context.expert_load_imbalance;
  // Tokens past an expert's capacity are dropped: the busiest expert computes at most that.
  if (moe.capacity_factor) counts.imbalance = std::min(counts.imbalance, *moe.capacity_factor);
  counts.computed = static_cast<double>(context.etp) * counts.routed * counts.imbalance;
  counts.local_experts = static_cast<double>(moe.num_experts / context.ep);
  counts.expert_width = static_cast<double>(moe.expert_ffn_hidden_size / context.etp);
  return counts;
}

MoeBlockCosts moe_block_costs(const LayerContext& context) {
  const schemas::ModelConfig& model = *context.model;
  const schemas::MoeConfig& moe = *model.moe;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const schemas::Dtype dtype = context.precision;
  const double element = context.activation_bytes();
  const double hidden = static_cast<double>(model.hidden_size);
  const double experts = static_cast<double>(moe.num_experts);
  const bool swiglu = schemas::is_gated(model.mlp_activation);
  const double gate = swiglu ? 2.0 : 1.0;
  const MoeTokenCounts tokens = moe_token_counts(context);

  MoeBlockCosts costs;

  // The router: its GEMM in 16 bits (Transformer Engine leaves it out of fp8), then scores,
  // top-k and the balancing terms over Tn × E fp32 values (about three passes forward, twice
  // that backward).
  const schemas::Dtype router_dtype =
      schemas::quantises_gemms(dtype) ? schemas::Dtype::bf16 : dtype;
  const GemmPassTimes router =
      gemm_pass_times(context, router_dtype, {{tokens.block_tokens, experts, hidden}});
  const double routing_bytes = 3 * 4.0 * tokens.block_tokens * experts;

  // The experts: each of the E/ep local experts takes computed / (E/ep) tokens.
  const double per_expert = tokens.computed / tokens.local_experts;
  const GemmPassTimes expert = gemm_pass_times(context, dtype,
                                               {{per_expert, gate * tokens.expert_width, hidden},
                                                {per_expert, hidden, tokens.expert_width}});
  const double local = tokens.local_experts;

  // Memory-bound kernels on the routed tokens: permute (read and write each copy), the two chunk
  // sorts around the all-to-all when ep > 1, the activation, and the un-permute that reads the
  // copies and writes the weighted sum.
  const bool across_ranks = context.ep > 1;
  double permute_bytes = 2 * element * tokens.routed * hidden +
                         element * (tokens.routed + tokens.block_tokens) * hidden;
  if (across_ranks) permute_bytes += 2 * 2 * element * tokens.computed * hidden;
  const double activation_bytes =
      (swiglu ? 3.0 : 2.0) * element * tokens.computed * tokens.expert_width;
  const double activation_evaluations = tokens.computed * tokens.expert_width;
  double cast_forward_bytes = 0;
  double cast_backward_bytes = 0;
  if (schemas::quantises_gemms(dtype)) {
    // Each expert GEMM's input cast to the low-precision format and its transpose (read 2, write
    // q + q with the block scales; transformer_layer_costs.cpp), and in the backward its output
    // gradient.
    const double cast_transpose = cast_transpose_bytes_per_element(dtype);
    cast_forward_bytes = cast_transpose * tokens.computed * (hidden + tokens.expert_width);
    cast_backward_bytes = cast_transpose * tokens.computed * (gate * tokens.expert_width + hidden);
  }
  // Kernels: router GEMM aside, scores, top-k, balancing loss; permute, un-permute, the sorts.
  const double kernels = 3 + 2 + (across_ranks ? 2 : 0);
  constexpr double kActivationForwardKernels = 1;
  constexpr double kActivationBackwardKernels = 2;
  costs.activation_forward.compute_s =
      elementwise_time_s(gpu, activation_bytes, activation_evaluations, kActivationForwardKernels);
  costs.activation_forward.kernels = kActivationForwardKernels;
  const double memory_forward_s =
      memory_bound_time_s(gpu, routing_bytes + permute_bytes + cast_forward_bytes, kernels) +
      costs.activation_forward.compute_s;
  const double memory_backward_s =
      memory_bound_time_s(gpu, 2 * (routing_bytes + permute_bytes) + cast_backward_bytes,
                          2 * kernels) +
      elementwise_time_s(gpu, 2 * activation_bytes, activation_evaluations,
                         kActivationBackwardKernels);

  // Dispatch and combine: the busiest rank receives `computed / etp` copies of h elements by
  // all-to-all, and with etp > 1 gathers its etp group's (and reduce-scatters after the experts).
  const double exchanged_bytes =
      element * tokens.computed / static_cast<double>(context.etp) * hidden;
  const double all_to_all_s =
      collective_time_s(*context.cluster, context.ep_span, Collective::all_to_all, exchanged_bytes);
  double expert_tp_s = 0;
  if (context.etp > 1) {
    const double gathered = element * tokens.computed * hidden;
    expert_tp_s =
        collective_time_s(*context.cluster, context.etp_span, Collective::all_gather, gathered) +
        collective_time_s(*context.cluster, context.etp_span, Collective::reduce_scatter, gathered);
  }
  const double exchange_s = 2 * all_to_all_s + expert_tp_s;

  // The dispatcher's preprocessing (moe_block_costs.h): small kernels at their launch floor, and
  // with ep > 1 the all-gather of every rank's per-expert counts (8 bytes each), dropless only.
  const bool dropless = !moe.capacity_factor;
  costs.preprocess_kernels = !dropless ? 1 : (across_ranks ? 9 : 2);
  const double preprocess_s = kernel_launch_s(gpu, costs.preprocess_kernels);
  const double count_gather_s =
      dropless && across_ranks
          ? collective_time_s(*context.cluster, context.ep_span, Collective::all_gather,
                              8 * experts * static_cast<double>(context.ep))
          : 0.0;

  costs.forward.compute_s =
      router.forward_s + local * expert.forward_s + memory_forward_s + preprocess_s;
  costs.forward.ep_comm_s = exchange_s + count_gather_s;
  costs.backward_input.compute_s = router.input_s + local * expert.input_s + memory_backward_s;
  costs.backward_input.ep_comm_s = exchange_s;
  costs.backward_weight.compute_s = router.weight_s + local * expert.weight_s;
  // Kernels: the router's GEMM, each local expert's two, the memory-bound kernels above and the
  // exchanges (two all-to-alls, and an all-gather and a reduce-scatter with etp > 1). The layer
  // charges their issue (layer_costs.h).
  const double exchanges = 2 + (context.etp > 1 ? 2 : 0);
  costs.forward.kernels =
      1 + 2 * local + kernels + kActivationForwardKernels + exchanges + costs.preprocess_kernels;
  costs.backward_input.kernels =
      1 + 2 * local + 2 * kernels + kActivationBackwardKernels + exchanges;
  costs.backward_weight.kernels = 1 + 2 * local;
  // The router's share: its GEMM and its three memory-bound kernels (twice that backward).
  costs.router_kernels = {.forward = 1 + 3, .backward_input = 1 + 2 * 3, .backward_weight = 1};
  // Useful FLOPs at the mean load (the imbalance only delays the busiest rank).
  costs.forward_flops = router.forward_flops + local * expert.forward_flops / tokens.imbalance;
  return costs;
}

}  // namespace strata::costmodels
