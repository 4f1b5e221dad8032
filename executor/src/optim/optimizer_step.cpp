#include "strata/executor/optim/optimizer_step.h"

#include <cmath>
#include <vector>

#include "../cuda/reductions.cuh"
#include "adamw_chunks.h"
#include "strata/executor/ops/dispatch.h"
#include "strata/executor/optim/gradient_clipping.h"

namespace strata::executor {
namespace {

// The chunk table of a store, uploaded once and reused while the store's layout stays the same.
const Tensor& device_chunks(const ParameterStore& parameters, const AdamWConfig& config,
                            std::int64_t& chunk_count) {
  static std::vector<cuda::AdamWChunk>* uploaded = new std::vector<cuda::AdamWChunk>();
  static Tensor* table = new Tensor();
  std::vector<cuda::AdamWChunk> chunks;
  for (const ParameterEntry& entry : parameters.entries()) {
    cuda::append_adamw_chunks(
        chunks, entry.offset, entry.value.numel(),
        entry.spec.weight_decay ? static_cast<float>(config.weight_decay) : 0.0f);
  }
  const auto same = [](const cuda::AdamWChunk& a, const cuda::AdamWChunk& b) {
    return a.first == b.first && a.count == b.count && a.weight_decay == b.weight_decay;
  };
  if (chunks.size() != uploaded->size() ||
      !std::equal(chunks.begin(), chunks.end(), uploaded->begin(), same)) {
    *table = upload_chunks(chunks);
    *uploaded = std::move(chunks);
  }
  chunk_count = static_cast<std::int64_t>(uploaded->size());
  return *table;
}

// Clipping, AdamW and the working copy's refresh in one pass over the flat buffers; the norm stays
// on the device until the step's end, when it is read back once.
double cuda_optimizer_step(ParameterStore& parameters, OptimizerMoments& moments,
                           double learning_rate, std::int64_t step, const AdamWConfig& config,
                           double max_gradient_norm) {
  Tensor& gradients = parameters.gradients();
  check_cuda_types("optimizer_step", {&parameters.compute_values()},
                   {&parameters.values(), &gradients, &moments.first, &moments.second});
  double norm = 0;
  if constexpr (kCudaBackendBuilt) {
    Tensor norm_squared = Tensor::zeros({1}, ScalarType::float64, Device::cuda);
    cuda::launch_sum(gradients.data<float>(), gradients.numel(), true, norm_squared.data<double>());
    std::int64_t chunk_count = 0;
    const Tensor& chunks = device_chunks(parameters, config, chunk_count);
    cuda::AdamWLaunch launch =
        cuda::adamw_launch(learning_rate, config.beta1, config.beta2, config.epsilon, step + 1);
    launch.norm_squared = norm_squared.data<double>();
    launch.max_norm = static_cast<float>(max_gradient_norm);
    cuda::launch_adamw(static_cast<const cuda::AdamWChunk*>(chunks.raw()), chunk_count,
                       parameters.values().data<float>(), gradients.data<float>(),
                       moments.first.data<float>(), moments.second.data<float>(),
                       parameters.has_working_copy() ? parameters.compute_values().raw() : nullptr,
                       parameters.compute_type(), launch);
    norm = std::sqrt(norm_squared.to(Device::cpu).data<double>()[0]);
  }
  return norm;
}

}  // namespace

OptimizerMoments OptimizerMoments::zeros_like(const ParameterStore& parameters) {
  const Shape shape{parameters.total_elements()};
  const ScalarType type = parameters.values().scalar_type();
  return OptimizerMoments{Tensor::zeros(shape, type, parameters.device()),
                          Tensor::zeros(shape, type, parameters.device())};
}

double optimizer_step(ParameterStore& parameters, OptimizerMoments& moments, double learning_rate,
                      std::int64_t step, const AdamWConfig& config, double max_gradient_norm) {
  if (parameters.device() == Device::cuda) {
    return cuda_optimizer_step(parameters, moments, learning_rate, step, config, max_gradient_norm);
  }
  // Two passes over memory, as on the GPU: the norm reads the gradients, then AdamW applies
  // clipping's factor as it reads them (the gradients themselves stay unscaled).
  std::vector<Tensor> gradients;
  gradients.reserve(parameters.entries().size());
  for (ParameterEntry& entry : parameters.entries()) gradients.push_back(entry.gradient);
  const double norm = global_gradient_norm(gradients);
  apply_adamw(parameters, moments, learning_rate, step, config,
              clipping_scale(norm, max_gradient_norm));
  return norm;
}

void apply_adamw(ParameterStore& parameters, OptimizerMoments& moments, double learning_rate,
                 std::int64_t step, const AdamWConfig& config, double gradient_scale) {
  for (ParameterEntry& entry : parameters.entries()) {
    Tensor first = moments.first.view(entry.offset, entry.shape);
    Tensor second = moments.second.view(entry.offset, entry.shape);
    adamw_update(entry.value, entry.gradient, first, second, learning_rate,
                 entry.spec.weight_decay ? config.weight_decay : 0.0, step + 1, config,
                 gradient_scale);
  }
  // A 16-bit working copy (bf16 on a GPU) follows the float32 values it is made from.
  parameters.refresh_compute_values();
}

}  // namespace strata::executor
