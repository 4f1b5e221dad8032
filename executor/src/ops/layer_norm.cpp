#include "strata/executor/ops/layer_norm.h"

#include <cmath>

#include "cuda/layer_norm.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, double epsilon,
                        Tensor& y, Tensor& mean, Tensor& rstd) {
  const std::int64_t hidden = weight.numel();
  check_same_numel("layer_norm_forward", x, y);
  STRATA_CHECK(mean.numel() * hidden == x.numel() && rstd.numel() == mean.numel(),
               "layer_norm_forward: x {} mean {} rstd {}", shape_to_string(x.shape()),
               shape_to_string(mean.shape()), shape_to_string(rstd.shape()));
  if (on_cuda("layer_norm_forward", {&x, &weight, bias, &y, &mean, &rstd})) {
    const ScalarType type =
        check_cuda_types("layer_norm_forward", {&x, &weight, bias, &y}, {&mean, &rstd});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_layer_norm_forward(x.raw(), weight.raw(), bias ? bias->raw() : nullptr, epsilon,
                                      y.raw(), mean.data<float>(), rstd.data<float>(),
                                      x.numel() / hidden, hidden, type);
    }
    return;
  }
  check_cpu_same_type("layer_norm_forward", {&x, &weight, bias, &y, &mean, &rstd});
  dispatch_floating(x.scalar_type(), "layer_norm_forward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(x, hidden);
    auto out = cpu::as_matrix<T>(y, hidden);
    const auto gain = cpu::as_vector<T>(weight);
    T* mean_of = mean.data<T>();
    T* rstd_of = rstd.data<T>();
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      const T row_mean = rows.row(n).mean();
      const T variance = (rows.row(n).array() - row_mean).square().mean();
      const T row_rstd = T(1) / std::sqrt(variance + static_cast<T>(epsilon));
      mean_of[n] = row_mean;
      rstd_of[n] = row_rstd;
      out.row(n) = ((rows.row(n).array() - row_mean) * row_rstd * gain.array()).matrix();
      if (bias != nullptr) out.row(n) += cpu::as_vector<T>(*bias);
    }
  });
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                         Tensor* dbias) {
  const std::int64_t hidden = weight.numel();
  check_same_numel("layer_norm_backward", x, dy);
  check_same_numel("layer_norm_backward", x, dx);
  if (on_cuda("layer_norm_backward", {&dy, &x, &weight, &mean, &rstd, &dx, &dweight, dbias})) {
    const ScalarType type = check_cuda_types("layer_norm_backward", {&dy, &x, &weight, &dx},
                                             {&mean, &rstd, &dweight, dbias});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_layer_norm_backward(dy.raw(), x.raw(), weight.raw(), mean.data<float>(),
                                       rstd.data<float>(), dx.raw(), dweight.data<float>(),
                                       dbias ? dbias->data<float>() : nullptr, x.numel() / hidden,
                                       hidden, type);
    }
    return;
  }
  check_cpu_same_type("layer_norm_backward",
                      {&dy, &x, &weight, &mean, &rstd, &dx, &dweight, dbias});
  dispatch_floating(x.scalar_type(), "layer_norm_backward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(x, hidden);
    const auto grad_out = cpu::as_matrix<T>(dy, hidden);
    auto grad_in = cpu::as_matrix<T>(dx, hidden);
    const auto gain = cpu::as_vector<T>(weight).array();
    auto grad_gain = cpu::as_vector<T>(dweight);
    const T* mean_of = mean.data<T>();
    const T* rstd_of = rstd.data<T>();
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      const auto normalized = ((rows.row(n).array() - mean_of[n]) * rstd_of[n]).eval();
      const auto scaled = (grad_out.row(n).array() * gain).eval();
      const T scaled_mean = scaled.mean();
      const T projection_mean = (scaled * normalized).mean();
      grad_in.row(n).array() += rstd_of[n] * (scaled - scaled_mean - normalized * projection_mean);
      grad_gain.array() += grad_out.row(n).array() * normalized;
      if (dbias != nullptr) cpu::as_vector<T>(*dbias) += grad_out.row(n);
    }
  });
}

}  // namespace strata::executor
