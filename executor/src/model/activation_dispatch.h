// The ungated MLP activations (GELU, squared ReLU; SwiGLU is gated and has its own two inputs)
// behind one call, for the dense layers, the routed experts and the shared experts. Private to
// executor/src/model.
#pragma once

#include "strata/executor/ops/gelu.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/squared_relu.h"
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

}  // namespace strata::executor::detail
