#include "strata/executor/ops/swiglu.h"

#include <cmath>

#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y) {
  check_cpu_same_type("swiglu_forward", {&gate, &up, &y});
  check_same_numel("swiglu_forward", gate, up);
  check_same_numel("swiglu_forward", gate, y);
  dispatch_floating(gate.scalar_type(), "swiglu_forward", [&]<class T>() {
    const T* g = gate.data<T>();
    const T* u = up.data<T>();
    T* out = y.data<T>();
    for (std::int64_t i = 0; i < gate.numel(); ++i) out[i] = g[i] * sigmoid(g[i]) * u[i];
  });
}

void swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up, Tensor& dgate,
                     Tensor& dup) {
  check_cpu_same_type("swiglu_backward", {&dy, &gate, &up, &dgate, &dup});
  check_same_numel("swiglu_backward", gate, dgate);
  check_same_numel("swiglu_backward", up, dup);
  dispatch_floating(gate.scalar_type(), "swiglu_backward", [&]<class T>() {
    const T* g = gate.data<T>();
    const T* u = up.data<T>();
    const T* grad_out = dy.data<T>();
    T* grad_gate = dgate.data<T>();
    T* grad_up = dup.data<T>();
    for (std::int64_t i = 0; i < gate.numel(); ++i) {
      const T s = sigmoid(g[i]);
      grad_gate[i] += grad_out[i] * u[i] * s * (T(1) + g[i] * (T(1) - s));
      grad_up[i] += grad_out[i] * g[i] * s;
    }
  });
}

}  // namespace strata::executor
