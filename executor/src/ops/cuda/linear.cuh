// CUDA launchers of the linear layer (ops/linear.h) through cuBLASLt, for row-major x [rows, in],
// weight [out, in], y [rows, out]: activations and weights in float32 (fp32 compute, no TF32) or
// bfloat16 (fp32 accumulation); the weight and bias gradients are always float32 — the master
// gradients of mixed precision — accumulated by the GEMM's epilogue (β = 1).
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// y = x·weightᵀ + bias (bias may be null). With gelu_input non-null the GEMM's epilogue also
// applies GELU (tanh): gelu_input = x·weightᵀ + bias and y = gelu(gelu_input).
void launch_linear_forward(const void* x, const void* weight, const void* bias, void* y,
                           void* gelu_input, std::int64_t rows, std::int64_t in, std::int64_t out,
                           ScalarType type);
// dx += dy·weight when accumulate, else dx = dy·weight (β = 0: dx is not read).
void launch_linear_backward_input(const void* dy, const void* weight, void* dx, std::int64_t rows,
                                  std::int64_t in, std::int64_t out, ScalarType type,
                                  bool accumulate);
// dweight += dyᵀ·x (float32), and dbias += Σ_rows dy when dbias is not null.
void launch_linear_backward_parameters(const void* dy, const void* x, float* dweight, float* dbias,
                                       std::int64_t rows, std::int64_t in, std::int64_t out,
                                       ScalarType type);

}  // namespace strata::executor::cuda
