// LayerNorm over the last dimension, forward and backward. Used by gpt models.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// y = (x − mean)·rstd·weight + bias per row of x [n, hidden]; stores mean[n] and rstd[n] (the
// only statistics backward needs). bias may be null.
void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, double epsilon,
                        Tensor& y, Tensor& mean, Tensor& rstd);
// Accumulates dx, dweight and dbias (null iff no bias). With x̂ = (x − mean)·rstd, g = dy·weight:
//   dx += rstd·(g − mean(g) − x̂·mean(g·x̂)),  dweight += Σ_rows dy·x̂,  dbias += Σ_rows dy.
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                         Tensor* dbias);

}  // namespace strata::executor
