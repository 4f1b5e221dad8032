#include "strata/executor/ops/bias.h"

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

void check(const char* op, const Tensor& rows, const Tensor& bias) {
  STRATA_CHECK(bias.numel() > 0 && rows.numel() % bias.numel() == 0, "{}: rows {} bias {}", op,
               shape_to_string(rows.shape()), shape_to_string(bias.shape()));
  STRATA_CHECK(!on_cuda(op, {&rows, &bias}), "{}: the parallel executor runs on the CPU backend",
               op);
  check_cpu_same_type(op, {&rows, &bias});
}

}  // namespace

void bias_forward(Tensor& y, const Tensor& bias) {
  check("bias_forward", y, bias);
  dispatch_floating(y.scalar_type(), "bias_forward", [&]<class T>() {
    cpu::as_matrix<T>(y, bias.numel()).rowwise() += cpu::as_vector<T>(bias);
  });
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  check("bias_backward", dy, dbias);
  dispatch_floating(dy.scalar_type(), "bias_backward", [&]<class T>() {
    cpu::as_vector<T>(dbias) += cpu::as_matrix<T>(dy, dbias.numel()).colwise().sum();
  });
}

}  // namespace strata::executor
