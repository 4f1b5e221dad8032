#include "strata/executor/optim/gradient_clipping.h"

#include <cmath>

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

double global_gradient_norm(std::span<const Tensor> gradients) {
  double sum_of_squares = 0;
  for (const Tensor& gradient : gradients) {
    check_cpu_same_type("global_gradient_norm", {&gradient});
    sum_of_squares +=
        dispatch_floating(gradient.scalar_type(), "global_gradient_norm", [&]<class T>() {
          return cpu::as_vector<T>(gradient).template cast<double>().squaredNorm();
        });
  }
  return std::sqrt(sum_of_squares);
}

double clip_gradients(std::span<Tensor> gradients, double max_norm) {
  const double norm = global_gradient_norm(gradients);
  if (max_norm <= 0 || norm <= max_norm) return norm;
  const double scale = max_norm / (norm + 1e-6);
  for (Tensor& gradient : gradients) {
    dispatch_floating(gradient.scalar_type(), "clip_gradients",
                      [&]<class T>() { cpu::as_vector<T>(gradient) *= static_cast<T>(scale); });
  }
  return norm;
}

}  // namespace strata::executor
