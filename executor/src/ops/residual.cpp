#include "strata/executor/ops/residual.h"

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void residual_forward(const Tensor& a, const Tensor& b, Tensor& y) {
  check_cpu_same_type("residual_forward", {&a, &b, &y});
  check_same_numel("residual_forward", a, b);
  check_same_numel("residual_forward", a, y);
  dispatch_floating(a.scalar_type(), "residual_forward", [&]<class T>() {
    cpu::as_vector<T>(y) = cpu::as_vector<T>(a) + cpu::as_vector<T>(b);
  });
}

void residual_backward(const Tensor& dy, Tensor& da, Tensor& db) {
  check_cpu_same_type("residual_backward", {&dy, &da, &db});
  check_same_numel("residual_backward", dy, da);
  check_same_numel("residual_backward", dy, db);
  dispatch_floating(dy.scalar_type(), "residual_backward", [&]<class T>() {
    cpu::as_vector<T>(da) += cpu::as_vector<T>(dy);
    cpu::as_vector<T>(db) += cpu::as_vector<T>(dy);
  });
}

}  // namespace strata::executor
