// Time of a mixture-of-experts layer's routed part on one rank, per micro-batch: the router, the
// token dispatch to the experts and back, and the experts as grouped GEMMs (a MoE layer's
// attention and shared experts are priced as a dense layer's, layer_costs.h).
//
// With Tn tokens entering the block on the rank (T/tp under sequence parallelism), top-k routing
// over E experts split ep ways and each expert's MLP split etp ways (Megatron-Core's alltoall
// dispatcher with parallel folding):
//   router          a [Tn × E × h] GEMM, then its scores, top-k and load-balancing terms
//                   (memory-bound, fp32).
//   dispatch        the Tn·k routed copies permuted by expert and sent by all-to-all over the
//                   ep group; with etp > 1 all-gathered over the etp group, so each rank
//                   computes R = etp·Tn·k token-expert pairs for its E/ep experts. Combine
//                   mirrors it (reduce-scatter over etp, all-to-all back, un-permute with the
//                   router's weights); the backward repeats both. Priced per network tier
//                   (collective_time.h), on the critical path: Megatron-LM and NeMo run them
//                   between the router and the experts unless asked to overlap them.
//   experts         E/ep grouped GEMMs of R·imbalance/(E/ep) tokens each: fc1 [· × g·f_e/etp ×
//                   h] and fc2 [· × h × f_e/etp]. GEMM efficiency follows each expert's token
//                   count (kernel_time.h), so small experts with few tokens run slower per FLOP.
//                   `imbalance` is the plan's expert_load_imbalance (the busiest expert's tokens
//                   over the mean, default 1), capped by the capacity factor where one drops
//                   tokens beyond it; the busiest rank sets the pace of the step.
//   memory-bound    permute, un-permute, the chunk sorts around the all-to-all (ep > 1), the
//                   activation on R·f_e/etp, fp8's casts of the expert GEMMs' inputs.
//   preprocessing   the dispatcher's token counts before the dispatch: the tokens per expert; a
//                   dropless block with ep > 1 also sums them into split sizes per rank and per
//                   local expert, all-gathers the counts over the ep group and copies three of
//                   them to the host (Megatron-Core's alltoall dispatcher): nine small kernels and
//                   a latency-bound all-gather; dropless on one rank, the count and its copy.
#pragma once

#include "strata/costmodels/layer_costs.h"

namespace strata::costmodels {

// Balanced routing: what the published benchmark runs force (Megatron's
// --moe-router-force-load-balancing) and what auxiliary-loss or bias balancing aims for. A run
// that measured its routing sets the plan's expert_load_imbalance.
inline constexpr double kDefaultExpertLoadImbalance = 1.0;

// The token counts of one MoE layer on the busiest rank, per micro-batch.
struct MoeTokenCounts {
  double block_tokens = 0;   // Tn: tokens entering the block on this rank
  double routed = 0;         // Tn·k token copies this rank dispatches
  double computed = 0;       // token-expert pairs its experts compute: etp·Tn·k·imbalance
  double local_experts = 0;  // E / ep
  double expert_width = 0;   // f_e / etp
  double imbalance = 1;      // after the capacity factor's cap
};
MoeTokenCounts moe_token_counts(const LayerContext& context);

// Kernels of one part of the block in each pass (what a CUDA graph of that part replays).
struct PassKernels {
  double forward = 0;
  double backward_input = 0;
  double backward_weight = 0;
};

struct MoeBlockCosts {
  PassTime forward;
  PassTime backward_input;
  PassTime backward_weight;
  PassKernels router_kernels;     // its GEMM, scores, top-k and balancing terms
  double preprocess_kernels = 0;  // the dispatcher's token counts (forward only)
  // The routed experts' activation alone, part of `forward` (what recomputing it costs).
  PassTime activation_forward;
  double forward_flops = 0;  // router and expert GEMMs at the mean load
};

// Requires a model with a moe block.
MoeBlockCosts moe_block_costs(const LayerContext& context);

}  // namespace strata::costmodels
