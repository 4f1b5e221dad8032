#include "strata/executor/ops/rms_norm.h"

#include <cmath>

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void rms_norm_forward(const Tensor& x, const Tensor& weight, double epsilon, Tensor& y,
                      Tensor& rstd) {
  check_cpu_same_type("rms_norm_forward", {&x, &weight, &y, &rstd});
  const std::int64_t hidden = weight.numel();
  check_same_numel("rms_norm_forward", x, y);
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
  check_cpu_same_type("rms_norm_backward", {&dy, &x, &weight, &rstd, &dx, &dweight});
  const std::int64_t hidden = weight.numel();
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
