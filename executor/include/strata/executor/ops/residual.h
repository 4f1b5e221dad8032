// Residual add, forward and backward. Used at both residual joins of every transformer layer.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// y = a + b (y may alias a).
void residual_forward(const Tensor& a, const Tensor& b, Tensor& y);
// da += dy and db += dy: the gradient flows unchanged into both branches.
void residual_backward(const Tensor& dy, Tensor& da, Tensor& db);

}  // namespace strata::executor
