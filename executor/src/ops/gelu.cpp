#include "strata/executor/ops/gelu.h"

#include <cmath>
#include <numbers>

#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

constexpr double kCubicCoefficient = 0.044715;

template <class T>
T tanh_argument(T x) {
  const T scale = static_cast<T>(std::sqrt(2.0 / std::numbers::pi));
  return scale * (x + static_cast<T>(kCubicCoefficient) * x * x * x);
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  check_cpu_same_type("gelu_forward", {&x, &y});
  check_same_numel("gelu_forward", x, y);
  dispatch_floating(x.scalar_type(), "gelu_forward", [&]<class T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      out[i] = T(0.5) * in[i] * (T(1) + std::tanh(tanh_argument(in[i])));
    }
  });
}

void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  check_cpu_same_type("gelu_backward", {&dy, &x, &dx});
  check_same_numel("gelu_backward", x, dx);
  dispatch_floating(x.scalar_type(), "gelu_backward", [&]<class T>() {
    const T scale = static_cast<T>(std::sqrt(2.0 / std::numbers::pi));
    const T* in = x.data<T>();
    const T* grad_out = dy.data<T>();
    T* grad_in = dx.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const T v = in[i];
      const T t = std::tanh(tanh_argument(v));
      const T dt = (T(1) - t * t) * scale * (T(1) + T(3 * kCubicCoefficient) * v * v);
      grad_in[i] += grad_out[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * dt);
    }
  });
}

}  // namespace strata::executor
