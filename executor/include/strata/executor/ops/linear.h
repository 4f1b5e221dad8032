// Linear layer: y = x·weightᵀ + bias, forward and backward. Used by every projection of the model.
// On CUDA the weight and bias gradients are float32 whatever the activations' type (mixed
// precision's master gradients).
// weight is [out, in] (PyTorch's and llm.c's layout), so that part 2 shards its rows
// (column-parallel) or its columns (row-parallel) without transposing.
#pragma once

#include "strata/executor/ops/gradient_write.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// x is read as [n, in] (leading dimensions flattened), y as [n, out]; bias may be null.
void linear_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y);

// y = gelu(x·weightᵀ + bias) with GPT-2's tanh GELU, keeping the pre-activation in gelu_input
// for gelu_backward: on CUDA one GEMM whose epilogue adds the bias and applies GELU.
void linear_gelu_forward(const Tensor& x, const Tensor& weight, const Tensor* bias,
                         Tensor& gelu_input, Tensor& y);

// Accumulates (+=), so gradient accumulation and residual branches need no extra buffers:
//   dx += dy·weight,  dweight += dyᵀ·x,  dbias += Σ_rows dy.
// dx may be null where the input needs no gradient; dbias is null iff the layer has no bias.
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor* dx,
                     Tensor& dweight, Tensor* dbias);
// The parameter half of linear_backward alone (dweight += dyᵀ·x, dbias += Σ_rows dy): the weight
// pass (W) that zero-bubble pipeline schedules run apart from the input gradient (dx = null in
// linear_backward would still compute it).
void linear_backward_parameters(const Tensor& dy, const Tensor& x, Tensor& dweight, Tensor* dbias);
// The input half alone: dx += dy·weight, or dx = dy·weight with GradientWrite::overwrite.
void linear_backward_input(const Tensor& dy, const Tensor& weight, Tensor& dx,
                           GradientWrite write = GradientWrite::accumulate);

}  // namespace strata::executor
