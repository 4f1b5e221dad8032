#include "strata/executor/ops/bias.h"

#include "cuda/bias.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

void check(const char* op, const Tensor& rows, const Tensor& bias) {
  STRATA_CHECK(bias.numel() > 0 && rows.numel() % bias.numel() == 0, "{}: rows {} bias {}", op,
               shape_to_string(rows.shape()), shape_to_string(bias.shape()));
}

}  // namespace

void bias_forward(Tensor& y, const Tensor& bias) {
  check("bias_forward", y, bias);
  if (on_cuda("bias_forward", {&y, &bias})) {
    const ScalarType type = check_cuda_types("bias_forward", {&y, &bias}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_bias_forward(y.raw(), bias.raw(), y.numel() / bias.numel(), bias.numel(), type);
    }
    return;
  }
  check_cpu_same_type("bias_forward", {&y, &bias});
  dispatch_floating(y.scalar_type(), "bias_forward", [&]<class T>() {
    cpu::as_matrix<T>(y, bias.numel()).rowwise() += cpu::as_vector<T>(bias);
  });
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  check("bias_backward", dy, dbias);
  if (on_cuda("bias_backward", {&dy, &dbias})) {
    const ScalarType type = check_cuda_types("bias_backward", {&dy}, {&dbias});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_bias_backward(dy.raw(), dbias.data<float>(), dy.numel() / dbias.numel(),
                                 dbias.numel(), type);
    }
    return;
  }
  check_cpu_same_type("bias_backward", {&dy, &dbias});
  dispatch_floating(dy.scalar_type(), "bias_backward", [&]<class T>() {
    cpu::as_vector<T>(dbias) += cpu::as_matrix<T>(dy, dbias.numel()).colwise().sum();
  });
}

}  // namespace strata::executor
