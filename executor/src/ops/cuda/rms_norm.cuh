// CUDA launchers of RMSNorm (ops/rms_norm.h) over rows of `hidden` elements: activations and
// weight in float32 or bfloat16, rstd and dweight in float32. One warp per row; dweight by
// deterministic column sums.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

void launch_rms_norm_forward(const void* x, const void* weight, double epsilon, void* y,
                             float* rstd, std::int64_t rows, std::int64_t hidden, ScalarType type);
// dx += rstd·(g − x·rstd²·mean(g·x)) with g = dy·weight; dweight += Σ dy·x·rstd.
void launch_rms_norm_backward(const void* dy, const void* x, const void* weight, const float* rstd,
                              void* dx, float* dweight, std::int64_t rows, std::int64_t hidden,
                              ScalarType type);

}  // namespace strata::executor::cuda
