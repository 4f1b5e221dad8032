#include "strata/executor/ops/squared_relu.h"

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void squared_relu_forward(const Tensor& x, Tensor& y) {
  check_same_numel("squared_relu_forward", x, y);
  check_cpu_same_type("squared_relu_forward", {&x, &y});
  dispatch_floating(x.scalar_type(), "squared_relu_forward", [&]<class T>() {
    cpu::as_vector<T>(y).array() = cpu::as_vector<T>(x).array().max(T(0)).square();
  });
}

void squared_relu_backward(const Tensor& dy, const Tensor& x, Tensor& dx, GradientWrite write) {
  check_same_numel("squared_relu_backward", x, dx);
  check_same_numel("squared_relu_backward", x, dy);
  check_cpu_same_type("squared_relu_backward", {&dy, &x, &dx});
  dispatch_floating(x.scalar_type(), "squared_relu_backward", [&]<class T>() {
    const auto gradient =
        cpu::as_vector<T>(dy).array() * (T(2) * cpu::as_vector<T>(x).array().max(T(0)));
    if (write == GradientWrite::accumulate) {
      cpu::as_vector<T>(dx).array() += gradient;
    } else {
      cpu::as_vector<T>(dx).array() = gradient;
    }
  });
}

}  // namespace strata::executor
