// The model's norm (LayerNorm or RMSNorm, from the model file) behind one call, for the layers and
// the final norm. Private to executor/src/model.
#pragma once

#include "strata/executor/ops/layer_norm.h"
#include "strata/executor/ops/rms_norm.h"
#include "strata/schemas/model_config.h"

namespace strata::executor::detail {

// Norm statistics and log-sum-exps: float32 under bfloat16 activations, else the activations' type.
inline ScalarType statistics_type(ScalarType activations) {
  return activations == ScalarType::bfloat16 ? ScalarType::float32 : activations;
}

// mean is unused by RMSNorm; bias/dbias are null where the norm has none.
inline void norm_forward(schemas::NormKind kind, const Tensor& x, const Tensor& weight,
                         const Tensor* bias, double epsilon, Tensor& y, Tensor& mean,
                         Tensor& rstd) {
  if (kind == schemas::NormKind::layernorm) {
    layer_norm_forward(x, weight, bias, epsilon, y, mean, rstd);
  } else {
    rms_norm_forward(x, weight, epsilon, y, rstd);
  }
}

inline void norm_backward(schemas::NormKind kind, const Tensor& dy, const Tensor& x,
                          const Tensor& weight, const Tensor& mean, const Tensor& rstd, Tensor& dx,
                          Tensor& dweight, Tensor* dbias) {
  if (kind == schemas::NormKind::layernorm) {
    layer_norm_backward(dy, x, weight, mean, rstd, dx, dweight, dbias);
  } else {
    rms_norm_backward(dy, x, weight, rstd, dx, dweight);
  }
}

}  // namespace strata::executor::detail
