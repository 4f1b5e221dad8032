#include "strata/executor/ops/residual.h"

#include "cuda/residual.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void residual_forward(const Tensor& a, const Tensor& b, Tensor& y) {
  check_same_numel("residual_forward", a, b);
  check_same_numel("residual_forward", a, y);
  if (on_cuda("residual_forward", {&a, &b, &y})) {
    const ScalarType type = check_cuda_types("residual_forward", {&a, &b, &y}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_residual_forward(a.raw(), b.raw(), y.raw(), a.numel(), type);
    }
    return;
  }
  check_cpu_same_type("residual_forward", {&a, &b, &y});
  dispatch_floating(a.scalar_type(), "residual_forward", [&]<class T>() {
    cpu::as_vector<T>(y) = cpu::as_vector<T>(a) + cpu::as_vector<T>(b);
  });
}

void residual_backward(const Tensor& dy, Tensor& da, Tensor& db) {
  check_same_numel("residual_backward", dy, da);
  check_same_numel("residual_backward", dy, db);
  if (on_cuda("residual_backward", {&dy, &da, &db})) {
    const ScalarType type = check_cuda_types("residual_backward", {&dy, &da, &db}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_residual_backward(dy.raw(), da.raw(), db.raw(), dy.numel(), type);
    }
    return;
  }
  check_cpu_same_type("residual_backward", {&dy, &da, &db});
  dispatch_floating(dy.scalar_type(), "residual_backward", [&]<class T>() {
    cpu::as_vector<T>(da) += cpu::as_vector<T>(dy);
    cpu::as_vector<T>(db) += cpu::as_vector<T>(dy);
  });
}

}  // namespace strata::executor
