// The MLP activations behind one call each, for the dense layers, the routed experts and the
// shared experts: the ungated ones (GELU, squared ReLU) after their one projection, the gated ones
// (SwiGLU, GPT-OSS's clamped SwiGLU) on their gate and up projections. Private to
// executor/src/model.
#pragma once

#include "strata/executor/ops/clamped_swiglu.h"
#include "strata/executor/ops/gelu.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/squared_relu.h"
#include "strata/executor/ops/swiglu.h"
#include "strata/schemas/model_config.h"

namespace strata::executor::detail {

// pre_activation = x·weightᵀ + bias, y = activation(pre_activation): what backward needs is
// pre_activation.
inline void linear_activation_forward(schemas::MlpActivation kind, const Tensor& x,
                                      const Tensor& weight, const Tensor* bias,
                                      Tensor& pre_activation, Tensor& y) {
  if (kind == schemas::MlpActivation::squared_relu) {
    linear_forward(x, weight, bias, pre_activation);
    squared_relu_forward(pre_activation, y);
  } else {
    linear_gelu_forward(x, weight, bias, pre_activation, y);
  }
}

inline void activation_backward(schemas::MlpActivation kind, const Tensor& dy,
                                const Tensor& pre_activation, Tensor& dx, GradientWrite write) {
  if (kind == schemas::MlpActivation::squared_relu) {
    squared_relu_backward(dy, pre_activation, dx, write);
  } else {
    gelu_backward(dy, pre_activation, dx, write);
  }
}

// y = unit(gate, up) of a gated activation (schemas::is_gated).
inline void gated_activation_forward(const schemas::ModelConfig& model, const Tensor& gate,
                                     const Tensor& up, Tensor& y) {
  if (model.mlp_activation == schemas::MlpActivation::clamped_swiglu) {
    clamped_swiglu_forward(gate, up, {model.swiglu_limit, model.swiglu_alpha}, y);
  } else {
    swiglu_forward(gate, up, y);
  }
}

// Accumulates dgate and dup.
inline void gated_activation_backward(const schemas::ModelConfig& model, const Tensor& dy,
                                      const Tensor& gate, const Tensor& up, Tensor& dgate,
                                      Tensor& dup) {
  if (model.mlp_activation == schemas::MlpActivation::clamped_swiglu) {
    clamped_swiglu_backward(dy, gate, up, {model.swiglu_limit, model.swiglu_alpha}, dgate, dup);
  } else {
    swiglu_backward(dy, gate, up, dgate, dup);
  }
}

}  // namespace strata::executor::detail
