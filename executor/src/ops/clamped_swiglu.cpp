#include "strata/executor/ops/clamped_swiglu.h"

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void clamped_swiglu_forward(const Tensor& gate, const Tensor& up, const SwigluClamp& clamp,
                            Tensor& y) {
  check_same_numel("clamped_swiglu_forward", gate, up);
  check_same_numel("clamped_swiglu_forward", gate, y);
  check_cpu_same_type("clamped_swiglu_forward", {&gate, &up, &y});
  dispatch_floating(gate.scalar_type(), "clamped_swiglu_forward", [&]<class T>() {
    const auto limit = static_cast<T>(clamp.limit);
    const auto alpha = static_cast<T>(clamp.alpha);
    const auto g = cpu::as_vector<T>(gate).array().min(limit).eval();
    const auto u = cpu::as_vector<T>(up).array().max(-limit).min(limit);
    cpu::as_vector<T>(y).array() = (u + T(1)) * g / (T(1) + (-alpha * g).exp());
  });
}

void clamped_swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up,
                             const SwigluClamp& clamp, Tensor& dgate, Tensor& dup) {
  check_same_numel("clamped_swiglu_backward", gate, dgate);
  check_same_numel("clamped_swiglu_backward", up, dup);
  check_same_numel("clamped_swiglu_backward", gate, dy);
  check_cpu_same_type("clamped_swiglu_backward", {&dy, &gate, &up, &dgate, &dup});
  dispatch_floating(gate.scalar_type(), "clamped_swiglu_backward", [&]<class T>() {
    const auto limit = static_cast<T>(clamp.limit);
    const auto alpha = static_cast<T>(clamp.alpha);
    const auto gate_in = cpu::as_vector<T>(gate).array();
    const auto up_in = cpu::as_vector<T>(up).array();
    const auto grad_out = cpu::as_vector<T>(dy).array();
    const auto g = gate_in.min(limit).eval();
    const auto u = up_in.max(-limit).min(limit).eval();
    const auto s = (T(1) / (T(1) + (-alpha * g).exp())).eval();
    // d/dg [g·σ(αg)] = σ(αg) + αg·σ(αg)(1 − σ(αg)); the clamps pass it where inside their bounds.
    const auto gate_passes = (gate_in <= limit).template cast<T>();
    const auto up_passes = ((up_in >= -limit) && (up_in <= limit)).template cast<T>();
    cpu::as_vector<T>(dgate).array() +=
        grad_out * (u + T(1)) * (s + alpha * g * s * (T(1) - s)) * gate_passes;
    cpu::as_vector<T>(dup).array() += grad_out * g * s * up_passes;
  });
}

}  // namespace strata::executor
