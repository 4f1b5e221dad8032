// GELU with the tanh approximation (GPT-2's), forward and backward. Used by gpt MLPs.
#pragma once

#include "strata/executor/ops/gradient_write.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// y = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), elementwise.
void gelu_forward(const Tensor& x, Tensor& y);
// dx += dy·gelu'(x), or dx = dy·gelu'(x) with GradientWrite::overwrite.
void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx,
                   GradientWrite write = GradientWrite::accumulate);

}  // namespace strata::executor
