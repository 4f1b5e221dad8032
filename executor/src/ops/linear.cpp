#include "strata/executor/ops/linear.h"

#include "cuda/linear.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"
#include "strata/executor/ops/gelu.h"

namespace strata::executor {
namespace {

void check_shapes(const char* op, const Tensor& x, const Tensor& weight, const Tensor& y) {
  const std::int64_t in = weight.size(1);
  const std::int64_t out = weight.size(0);
  STRATA_CHECK(x.numel() % in == 0 && y.numel() / out == x.numel() / in && y.numel() % out == 0,
               "{}: x {} y {} weight {}", op, shape_to_string(x.shape()),
               shape_to_string(y.shape()), shape_to_string(weight.shape()));
}

void cuda_forward(const char* op, const Tensor& x, const Tensor& weight, const Tensor* bias,
                  Tensor* gelu_input, Tensor& y) {
  const ScalarType type = check_cuda_types(op, {&x, &weight, bias, gelu_input, &y}, {});
  if constexpr (kCudaBackendBuilt) {
    cuda::launch_linear_forward(x.raw(), weight.raw(), bias ? bias->raw() : nullptr, y.raw(),
                                gelu_input ? gelu_input->raw() : nullptr,
                                x.numel() / weight.size(1), weight.size(1), weight.size(0), type);
  }
}

}  // namespace

void linear_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& y) {
  check_shapes("linear_forward", x, weight, y);
  if (on_cuda("linear_forward", {&x, &weight, bias, &y})) {
    cuda_forward("linear_forward", x, weight, bias, nullptr, y);
    return;
  }
  check_cpu_same_type("linear_forward", {&x, &weight, bias, &y});
  const std::int64_t in = weight.size(1);
  const std::int64_t out = weight.size(0);
  dispatch_floating(x.scalar_type(), "linear_forward", [&]<class T>() {
    auto y_matrix = cpu::as_matrix<T>(y, out);
    y_matrix.noalias() = cpu::as_matrix<T>(x, in) * cpu::as_matrix<T>(weight, in).transpose();
    if (bias != nullptr) y_matrix.rowwise() += cpu::as_vector<T>(*bias);
  });
}

void linear_gelu_forward(const Tensor& x, const Tensor& weight, const Tensor* bias,
                         Tensor& gelu_input, Tensor& y) {
  check_shapes("linear_gelu_forward", x, weight, y);
  check_same_numel("linear_gelu_forward", gelu_input, y);
  if (on_cuda("linear_gelu_forward", {&x, &weight, bias, &gelu_input, &y})) {
    cuda_forward("linear_gelu_forward", x, weight, bias, &gelu_input, y);
    return;
  }
  linear_forward(x, weight, bias, gelu_input);
  gelu_forward(gelu_input, y);
}

void linear_backward_input(const Tensor& dy, const Tensor& weight, Tensor& dx,
                           GradientWrite write) {
  check_shapes("linear_backward_input", dx, weight, dy);
  const std::int64_t in = weight.size(1);
  const std::int64_t out = weight.size(0);
  if (on_cuda("linear_backward_input", {&dy, &weight, &dx})) {
    const ScalarType type = check_cuda_types("linear_backward_input", {&dy, &weight, &dx}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_linear_backward_input(dy.raw(), weight.raw(), dx.raw(), dx.numel() / in, in, out,
                                         type, write == GradientWrite::accumulate);
    }
    return;
  }
  check_cpu_same_type("linear_backward_input", {&dy, &weight, &dx});
  dispatch_floating(dx.scalar_type(), "linear_backward_input", [&]<class T>() {
    if (write == GradientWrite::accumulate) {
      cpu::as_matrix<T>(dx, in).noalias() +=
          cpu::as_matrix<T>(dy, out) * cpu::as_matrix<T>(weight, in);
    } else {
      cpu::as_matrix<T>(dx, in).noalias() =
          cpu::as_matrix<T>(dy, out) * cpu::as_matrix<T>(weight, in);
    }
  });
}

void linear_backward_parameters(const Tensor& dy, const Tensor& x, Tensor& dweight, Tensor* dbias) {
  STRATA_CHECK(dweight.dim() == 2, "linear_backward_parameters: weight gradient {} is not a matrix",
               shape_to_string(dweight.shape()));
  check_shapes("linear_backward_parameters", x, dweight, dy);
  const std::int64_t in = dweight.size(1);
  const std::int64_t out = dweight.size(0);
  if (on_cuda("linear_backward_parameters", {&dy, &x, &dweight, dbias})) {
    const ScalarType type =
        check_cuda_types("linear_backward_parameters", {&dy, &x}, {&dweight, dbias});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_linear_backward_parameters(dy.raw(), x.raw(), dweight.data<float>(),
                                              dbias ? dbias->data<float>() : nullptr,
                                              x.numel() / in, in, out, type);
    }
    return;
  }
  check_cpu_same_type("linear_backward_parameters", {&dy, &x, &dweight, dbias});
  dispatch_floating(x.scalar_type(), "linear_backward_parameters", [&]<class T>() {
    const auto dy_matrix = cpu::as_matrix<T>(dy, out);
    cpu::as_matrix<T>(dweight, in).noalias() += dy_matrix.transpose() * cpu::as_matrix<T>(x, in);
    if (dbias != nullptr) cpu::as_vector<T>(*dbias) += dy_matrix.colwise().sum();
  });
}

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, Tensor* dx,
                     Tensor& dweight, Tensor* dbias) {
  check_shapes("linear_backward", x, weight, dy);
  check_same_numel("linear_backward", weight, dweight);
  if (dx != nullptr) {
    check_same_numel("linear_backward", x, *dx);
    linear_backward_input(dy, weight, *dx);
  }
  Tensor dweight_matrix = dweight.reshaped(weight.shape());
  linear_backward_parameters(dy, x, dweight_matrix, dbias);
}

}  // namespace strata::executor
