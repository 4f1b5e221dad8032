// Forward, input-gradient and weight-gradient times of a layer's GEMMs, from their forward
// shapes: the building block of the layer costs (layer_costs.h) and of a MoE layer's expert
// GEMMs (moe_block_costs.h).
#pragma once

#include <vector>

#include "strata/costmodels/layer_costs.h"

namespace strata::costmodels {

// Y[m×n] = X[m×k]·W[k×n].
struct GemmShape {
  double m = 0, n = 0, k = 0;
};

// In sum, and (forward and input gradient) per shape.
struct GemmPassTimes {
  double forward_s = 0, input_s = 0, weight_s = 0, forward_flops = 0;
  std::vector<double> forward_each_s, input_each_s;
};

// dX[m×k] = dY·Wᵀ and dW[k×n] = Xᵀ·dY for each shape, the weight gradient adding into the
// plan's gradient accumulator (wider than the GEMM's output under bf16 and fp8).
GemmPassTimes gemm_pass_times(const LayerContext& context, schemas::Dtype dtype,
                              const std::vector<GemmShape>& shapes);

}  // namespace strata::costmodels
