#include "strata/executor/ops/swiglu.h"

#include "cuda/swiglu.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

// Eigen arrays, so that exp runs vectorised.
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y) {
  check_same_numel("swiglu_forward", gate, up);
  check_same_numel("swiglu_forward", gate, y);
  if (on_cuda("swiglu_forward", {&gate, &up, &y})) {
    const ScalarType type = check_cuda_types("swiglu_forward", {&gate, &up, &y}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_swiglu_forward(gate.raw(), up.raw(), y.raw(), gate.numel(), type);
    }
    return;
  }
  check_cpu_same_type("swiglu_forward", {&gate, &up, &y});
  dispatch_floating(gate.scalar_type(), "swiglu_forward", [&]<class T>() {
    const auto g = cpu::as_vector<T>(gate).array();
    cpu::as_vector<T>(y).array() = g / (T(1) + (-g).exp()) * cpu::as_vector<T>(up).array();
  });
}

void swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up, Tensor& dgate,
                     Tensor& dup) {
  check_same_numel("swiglu_backward", gate, dgate);
  check_same_numel("swiglu_backward", up, dup);
  check_same_numel("swiglu_backward", gate, dy);
  if (on_cuda("swiglu_backward", {&dy, &gate, &up, &dgate, &dup})) {
    const ScalarType type =
        check_cuda_types("swiglu_backward", {&dy, &gate, &up, &dgate, &dup}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_swiglu_backward(dy.raw(), gate.raw(), up.raw(), dgate.raw(), dup.raw(),
                                   gate.numel(), type);
    }
    return;
  }
  check_cpu_same_type("swiglu_backward", {&dy, &gate, &up, &dgate, &dup});
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
