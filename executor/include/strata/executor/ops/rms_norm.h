// RMSNorm over the last dimension, forward and backward. Used by llama models.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// y = x·rstd·weight with rstd = 1/√(mean(x²) + ε) per row of x [n, hidden]; stores rstd[n].
void rms_norm_forward(const Tensor& x, const Tensor& weight, double epsilon, Tensor& y,
                      Tensor& rstd);
// Accumulates, with g = dy·weight: dx += rstd·(g − x·rstd²·mean(g·x)), dweight += Σ dy·x·rstd.
void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                       Tensor& dx, Tensor& dweight);

}  // namespace strata::executor
