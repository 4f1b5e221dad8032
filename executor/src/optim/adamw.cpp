#include "strata/executor/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "adamw_chunks.h"
#include "cuda/adamw.cuh"
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
                  std::int64_t step, const AdamWConfig& config, double gradient_scale) {
  check_same_numel("adamw_update", parameter, gradient);
  check_same_numel("adamw_update", parameter, first_moment);
  check_same_numel("adamw_update", parameter, second_moment);
  STRATA_CHECK(step >= 1, "adamw_update: step {} (steps count from 1)", step);
  if (on_cuda("adamw_update", {&parameter, &gradient, &first_moment, &second_moment})) {
    check_cuda_types("adamw_update", {&parameter},
                     {&parameter, &gradient, &first_moment, &second_moment});
    if constexpr (kCudaBackendBuilt) {
      // A clipped gradient is scaled in a copy: the caller's gradient stays as it was given.
      Tensor scaled;
      if (gradient_scale != 1.0) {
        scaled = Tensor::zeros_like(gradient);
        scaled.copy_from(gradient);
        cuda::launch_scale(scaled.data<float>(), scaled.numel(),
                           static_cast<float>(gradient_scale));
      }
      const Tensor& read = gradient_scale != 1.0 ? scaled : gradient;
      std::vector<cuda::AdamWChunk> chunks;
      cuda::append_adamw_chunks(chunks, 0, parameter.numel(), static_cast<float>(weight_decay));
      const Tensor table = upload_chunks(chunks);
      cuda::launch_adamw(
          static_cast<const cuda::AdamWChunk*>(table.raw()),
          static_cast<std::int64_t>(chunks.size()), parameter.data<float>(), read.data<float>(),
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
    const T scale = static_cast<T>(gradient_scale);
    auto p = cpu::as_vector<T>(parameter).array();
    auto m = cpu::as_vector<T>(first_moment).array();
    auto v = cpu::as_vector<T>(second_moment).array();
    const auto g = cpu::as_vector<T>(gradient).array();
    // One pass over memory: block by block, so that each block's four streams are read once and
    // its three written once (28 bytes a float32 parameter) while Eigen vectorises the square root
    // and the division inside the block. The operations and their rounding are PyTorch's:
    // g·scale as clip_grad_norm_ leaves it, p·decay, then the update.
    constexpr Eigen::Index kBlock = 2048;
    for (Eigen::Index first = 0; first < p.size(); first += kBlock) {
      const Eigen::Index count = std::min(kBlock, p.size() - first);
      auto pb = p.segment(first, count);
      auto mb = m.segment(first, count);
      auto vb = v.segment(first, count);
      const auto gb = g.segment(first, count) * scale;
      mb = beta1 * mb + (T(1) - beta1) * gb;
      vb = beta2 * vb + (T(1) - beta2) * gb.square();
      pb = pb * decay - step_size * mb / (vb.sqrt() / bias2_root + epsilon);
    }
  });
}

}  // namespace strata::executor
