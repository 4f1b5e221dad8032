#include "strata/executor/ops/linear.h"

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void linear_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y) {
  check_cpu_same_type("linear_forward", {&x, &weight, bias, &y});
  const std::int64_t in = weight.size(1);
  const std::int64_t out = weight.size(0);
  STRATA_CHECK(x.numel() % in == 0 && y.numel() / out == x.numel() / in,
               "linear_forward: x {} y {} weight {}", shape_to_string(x.shape()),
               shape_to_string(y.shape()), shape_to_string(weight.shape()));
  dispatch_floating(x.scalar_type(), "linear_forward", [&]<class T>() {
    auto y_matrix = cpu::as_matrix<T>(y, out);
    y_matrix.noalias() = cpu::as_matrix<T>(x, in) * cpu::as_matrix<T>(weight, in).transpose();
    if (bias != nullptr) y_matrix.rowwise() += cpu::as_vector<T>(*bias);
  });
}

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor* dx,
                     Tensor& dweight, Tensor* dbias) {
  check_cpu_same_type("linear_backward", {&dy, &x, &weight, dx, &dweight, dbias});
  const std::int64_t in = weight.size(1);
  const std::int64_t out = weight.size(0);
  check_same_numel("linear_backward", weight, dweight);
  dispatch_floating(x.scalar_type(), "linear_backward", [&]<class T>() {
    const auto dy_matrix = cpu::as_matrix<T>(dy, out);
    if (dx != nullptr) {
      cpu::as_matrix<T>(*dx, in).noalias() += dy_matrix * cpu::as_matrix<T>(weight, in);
    }
    cpu::as_matrix<T>(dweight, in).noalias() += dy_matrix.transpose() * cpu::as_matrix<T>(x, in);
    if (dbias != nullptr) cpu::as_vector<T>(*dbias) += dy_matrix.colwise().sum();
  });
}

}  // namespace strata::executor
