// CUDA launchers of the separate bias (ops/bias.h), the bias of a row-parallel linear layer added
// after the tensor-parallel sum: rows and bias in float32 or bfloat16, the bias gradient in
// float32 by the deterministic column sums the linear layer's fused bias uses.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// y[n, :] += bias for y read as [rows, features].
void launch_bias_forward(void* y, const void* bias, std::int64_t rows, std::int64_t features,
                         ScalarType type);
// dbias += Σ_n dy[n, :], in the same order on every run.
void launch_bias_backward(const void* dy, float* dbias, std::int64_t rows, std::int64_t features,
                          ScalarType type);

}  // namespace strata::executor::cuda
