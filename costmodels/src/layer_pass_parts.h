// Parts of a layer pass's costs that the transformer layer (transformer_layer_costs.cpp) and the
// embedding and LM head (layer_costs.cpp) share.
#pragma once

#include "strata/costmodels/layer_costs.h"

namespace strata::costmodels::detail {

// ZeRO-3 layer by layer: gathering `parameters` (this rank's tp shard of them, in 16 bits) over
// the shard group, and reduce-scattering their gradients (at the gradient accumulator's width).
struct Zero3Collectives {
  double gather_s = 0;
  double scatter_s = 0;
};
// `parameters` over the dp·cp shard group.
Zero3Collectives zero3_collectives(const LayerContext& context, double parameters);
// A layer's: its dense parameters over the dp·cp shard group, a MoE layer's routed experts over
// the expert data-parallel shard group (their replicas priced on the dense replicas' span).
Zero3Collectives zero3_collectives(const LayerContext& context, LayerKind kind);

// What a collective adds to the compute it runs beside: the part it outlasts the compute by,
// plus the compute's slowdown while they overlap (NCCL takes SMs and HBM).
double beside_compute_s(const LayerContext& context, double comm_s, double compute_s);

// Each pass's host issue time from its kernel count (costs built without it: the counts only).
// A kernel replayed from a CUDA graph costs the host nothing of its own; each graph one launch.
void charge_host_issue(const LayerContext& context, PassCosts& costs);

}  // namespace strata::costmodels::detail
