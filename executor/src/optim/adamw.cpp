#include "strata/executor/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "adamw_chunks.h"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

Tensor upload_chunks(const std::vector<cuda::AdamWChunk>& chunks) {
  // The table travels as raw bytes (an AdamWChunk is 16 of them).
  static_assert(sizeof(cuda::AdamWChunk) % 4 == 0);
  const std::int64_t words =
      static_cast<std::int64_t>(chunks.size() * sizeof(cuda::AdamWChunk) / 4);
  return Tensor::borrow(const_cast<cuda::AdamWChunk*>(chunks.data()), {words}, ScalarType::int32)
      .to(Device::cuda);
}

void adamw_update(Tensor& parameter, const Tensor& gradient, Tensor& first_moment,
                  Tensor& second_moment, double learning_rate, double weight_decay,
                  std::int64_t step, const AdamWConfig& config) {
  check_same_numel("adamw_update", parameter, gradient);
  check_same_numel("adamw_update", parameter, first_moment);
  check_same_numel("adamw_update", parameter, second_moment);
  STRATA_CHECK(step >= 1, "adamw_update: step {} (steps count from 1)", step);
  if (on_cuda("adamw_update", {&parameter, &gradient, &first_moment, &second_moment})) {
    check_cuda_types("adamw_update", {&parameter},
                     {&parameter, &gradient, &first_moment, &second_moment});
    if constexpr (kCudaBackendBuilt) {
      std::vector<cuda::AdamWChunk> chunks;
      cuda::append_adamw_chunks(chunks, 0, parameter.numel(), static_cast<float>(weight_decay));
      const Tensor table = upload_chunks(chunks);
      cuda::launch_adamw(
          static_cast<const cuda::AdamWChunk*>(table.raw()),
          static_cast<std::int64_t>(chunks.size()), parameter.data<float>(), gradient.data<float>(),
          first_moment.data<float>(), second_moment.data<float>(), nullptr, ScalarType::float32,
          cuda::adamw_launch(learning_rate, config.beta1, config.beta2, config.epsilon, step));
    }
    return;
  }
  check_cpu_same_type("adamw_update", {&parameter, &gradient, &first_moment, &second_moment});
  dispatch_floating(parameter.scalar_type(), "adamw_update", [&]<class T>() {
    const double bias1 = 1.0 - std::pow(config.beta1, static_cast<double>(step));
    const double bias2 = 1.0 - std::pow(config.beta2, static_cast<double>(step));
    const T decay = static_cast<T>(1.0 - learning_rate * weight_decay);
    const T beta1 = static_cast<T>(config.beta1);
    const T beta2 = static_cast<T>(config.beta2);
    const T step_size = static_cast<T>(learning_rate / bias1);
    const T bias2_root = static_cast<T>(std::sqrt(bias2));
    const T epsilon = static_cast<T>(config.epsilon);
    // Eigen arrays: the square root and the division run vectorised over the whole tensor.
    auto p = cpu::as_vector<T>(parameter).array();
    auto m = cpu::as_vector<T>(first_moment).array();
    auto v = cpu::as_vector<T>(second_moment).array();
    const auto g = cpu::as_vector<T>(gradient).array();
    p *= decay;
    m = beta1 * m + (T(1) - beta1) * g;
    v = beta2 * v + (T(1) - beta2) * g.square();
    p -= step_size * m / (v.sqrt() / bias2_root + epsilon);
  });
}

}  // namespace strata::executor
