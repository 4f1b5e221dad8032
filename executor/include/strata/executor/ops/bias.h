// A bias added on its own, forward and backward: the bias of a row-parallel linear layer, which
// is added once after the partial outputs are summed across the tensor-parallel group (added
// inside each rank's GEMM it would be counted tp times). One device fuses biases into its GEMMs
// (linear.h).
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// y[n, :] += bias for y read as [n, features].
void bias_forward(Tensor& y, const Tensor& bias);
// dbias += Σ_n dy[n, :].
void bias_backward(const Tensor& dy, Tensor& dbias);

}  // namespace strata::executor
