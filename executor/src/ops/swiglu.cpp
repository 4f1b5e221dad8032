#include "strata/executor/ops/swiglu.h"

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

// Eigen arrays, so that exp runs vectorised.
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y) {
  check_cpu_same_type("swiglu_forward", {&gate, &up, &y});
  check_same_numel("swiglu_forward", gate, up);
  check_same_numel("swiglu_forward", gate, y);
  dispatch_floating(gate.scalar_type(), "swiglu_forward", [&]<class T>() {
    const auto g = cpu::as_vector<T>(gate).array();
    cpu::as_vector<T>(y).array() = g / (T(1) + (-g).exp()) * cpu::as_vector<T>(up).array();
  });
}

void swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up, Tensor& dgate,
                     Tensor& dup) {
  check_cpu_same_type("swiglu_backward", {&dy, &gate, &up, &dgate, &dup});
  check_same_numel("swiglu_backward", gate, dgate);
  check_same_numel("swiglu_backward", up, dup);
  dispatch_floating(gate.scalar_type(), "swiglu_backward", [&]<class T>() {
    const auto g = cpu::as_vector<T>(gate).array();
    const auto u = cpu::as_vector<T>(up).array();
    const auto grad_out = cpu::as_vector<T>(dy).array();
    const auto s = (T(1) / (T(1) + (-g).exp())).eval();
    cpu::as_vector<T>(dgate).array() += grad_out * u * s * (T(1) + g * (T(1) - s));
    cpu::as_vector<T>(dup).array() += grad_out * g * s;
  });
}

}  // namespace strata::executor
