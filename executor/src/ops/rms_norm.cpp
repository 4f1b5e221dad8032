#include "strata/executor/ops/rms_norm.h"

#include <cmath>

#include "cuda/rms_norm.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void rms_norm_forward(const Tensor& x, const Tensor& weight, double epsilon, Tensor& y,
                      Tensor& rstd) {
  const std::int64_t hidden = weight.numel();
  check_same_numel("rms_norm_forward", x, y);
  STRATA_CHECK(rstd.numel() * hidden == x.numel(), "rms_norm_forward: x {} rstd {}",
               shape_to_string(x.shape()), shape_to_string(rstd.shape()));
  if (on_cuda("rms_norm_forward", {&x, &weight, &y, &rstd})) {
    const ScalarType type = check_cuda_types("rms_norm_forward", {&x, &weight, &y}, {&rstd});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_rms_norm_forward(x.raw(), weight.raw(), epsilon, y.raw(), rstd.data<float>(),
                                    x.numel() / hidden, hidden, type);
    }
    return;
  }
  check_cpu_same_type("rms_norm_forward", {&x, &weight, &y, &rstd});
  dispatch_floating(x.scalar_type(), "rms_norm_forward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(x, hidden);
    auto out = cpu::as_matrix<T>(y, hidden);
    const auto gain = cpu::as_vector<T>(weight).array();
    T* rstd_of = rstd.data<T>();
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      const T row_rstd = T(1) / std::sqrt(rows.row(n).squaredNorm() / static_cast<T>(hidden) +
                                          static_cast<T>(epsilon));
      rstd_of[n] = row_rstd;
      out.row(n).array() = rows.row(n).array() * row_rstd * gain;
    }
  });
}

void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                       Tensor& dx, Tensor& dweight) {
  const std::int64_t hidden = weight.numel();
  check_same_numel("rms_norm_backward", x, dy);
  check_same_numel("rms_norm_backward", x, dx);
  if (on_cuda("rms_norm_backward", {&dy, &x, &weight, &rstd, &dx, &dweight})) {
    const ScalarType type =
        check_cuda_types("rms_norm_backward", {&dy, &x, &weight, &dx}, {&rstd, &dweight});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_rms_norm_backward(dy.raw(), x.raw(), weight.raw(), rstd.data<float>(), dx.raw(),
                                     dweight.data<float>(), x.numel() / hidden, hidden, type);
    }
    return;
  }
  check_cpu_same_type("rms_norm_backward", {&dy, &x, &weight, &rstd, &dx, &dweight});
  dispatch_floating(x.scalar_type(), "rms_norm_backward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(x, hidden);
    const auto grad_out = cpu::as_matrix<T>(dy, hidden);
    auto grad_in = cpu::as_matrix<T>(dx, hidden);
    const auto gain = cpu::as_vector<T>(weight).array();
    auto grad_gain = cpu::as_vector<T>(dweight);
    const T* rstd_of = rstd.data<T>();
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      const auto scaled = (grad_out.row(n).array() * gain).eval();
      const T projection_mean = (scaled * rows.row(n).array()).mean();
      const T r = rstd_of[n];
      grad_in.row(n).array() += r * (scaled - rows.row(n).array() * (r * r * projection_mean));
      grad_gain.array() += grad_out.row(n).array() * rows.row(n).array() * r;
    }
  });
}

}  // namespace strata::executor
