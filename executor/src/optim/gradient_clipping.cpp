#include "strata/executor/optim/gradient_clipping.h"

#include <cmath>

#include "../cuda/reductions.cuh"
#include "cuda/adamw.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

double global_gradient_norm(std::span<const Tensor> gradients) {
  double sum_of_squares = 0;
  for (const Tensor& gradient : gradients) {
    if (on_cuda("global_gradient_norm", {&gradient})) {
      check_cuda_types("global_gradient_norm", {&gradient}, {&gradient});
      if constexpr (kCudaBackendBuilt) {
        Tensor result = Tensor::zeros({1}, ScalarType::float64, Device::cuda);
        cuda::launch_sum(gradient.data<float>(), gradient.numel(), true, result.data<double>());
        sum_of_squares += result.to(Device::cpu).data<double>()[0];
      }
      continue;
    }
    check_cpu_same_type("global_gradient_norm", {&gradient});
    sum_of_squares +=
        dispatch_floating(gradient.scalar_type(), "global_gradient_norm", [&]<class T>() {
          return cpu::as_vector<T>(gradient).template cast<double>().squaredNorm();
        });
  }
  return std::sqrt(sum_of_squares);
}

double clipping_scale(double norm, double max_norm) {
  return max_norm <= 0 || norm <= max_norm ? 1.0 : max_norm / (norm + 1e-6);
}

double clip_gradients(std::span<Tensor> gradients, double max_norm) {
  const double norm = global_gradient_norm(gradients);
  const double scale = clipping_scale(norm, max_norm);
  if (scale == 1.0) return norm;
  for (Tensor& gradient : gradients) {
    if (gradient.device() == Device::cuda) {
      if constexpr (kCudaBackendBuilt) {
        cuda::launch_scale(gradient.data<float>(), gradient.numel(), static_cast<float>(scale));
      }
      continue;
    }
    dispatch_floating(gradient.scalar_type(), "clip_gradients",
                      [&]<class T>() { cpu::as_vector<T>(gradient) *= static_cast<T>(scale); });
  }
  return norm;
}

}  // namespace strata::executor
