// Squared ReLU (So et al. 2021, "Primer"; Nemotron-4's MLP), forward and backward. CPU backend;
// the CUDA backend refuses models that use it (executor/train/trainer.h's check_plan_runs).
#pragma once

#include "strata/executor/ops/gradient_write.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// y = max(x, 0)², elementwise.
void squared_relu_forward(const Tensor& x, Tensor& y);
// dx += dy·2·max(x, 0), or dx = dy·2·max(x, 0) with GradientWrite::overwrite.
void squared_relu_backward(const Tensor& dy, const Tensor& x, Tensor& dx,
                           GradientWrite write = GradientWrite::accumulate);

}  // namespace strata::executor
