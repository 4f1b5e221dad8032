// CUDA launchers of LayerNorm (ops/layer_norm.h) over rows of `hidden` elements: x, weight, bias,
// y and gradients of activations in float32 or bfloat16; mean, rstd and the parameter gradients
// in float32. One warp per row; parameter gradients by deterministic column sums.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// bias may be null.
void launch_layer_norm_forward(const void* x, const void* weight, const void* bias, double epsilon,
                               void* y, float* mean, float* rstd, std::int64_t rows,
                               std::int64_t hidden, ScalarType type);
// dx += …, dweight += Σ dy·x̂, dbias += Σ dy (dbias may be null).
void launch_layer_norm_backward(const void* dy, const void* x, const void* weight,
                                const float* mean, const float* rstd, void* dx, float* dweight,
                                float* dbias, std::int64_t rows, std::int64_t hidden,
                                ScalarType type);

}  // namespace strata::executor::cuda
