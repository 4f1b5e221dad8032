#include "strata/executor/optim/optimizer_step.h"

#include <vector>

#include "strata/executor/optim/gradient_clipping.h"

namespace strata::executor {

OptimizerMoments OptimizerMoments::zeros_like(const ParameterStore& parameters) {
  const Shape shape{parameters.total_elements()};
  const ScalarType type = parameters.values().scalar_type();
  return OptimizerMoments{Tensor::zeros(shape, type), Tensor::zeros(shape, type)};
}

double optimizer_step(ParameterStore& parameters, OptimizerMoments& moments, double learning_rate,
                      std::int64_t step, const AdamWConfig& config, double max_gradient_norm) {
  std::vector<Tensor> gradients;
  gradients.reserve(parameters.entries().size());
  for (ParameterEntry& entry : parameters.entries()) gradients.push_back(entry.gradient);
  const double norm = clip_gradients(gradients, max_gradient_norm);
  for (ParameterEntry& entry : parameters.entries()) {
    Tensor first = moments.first.view(entry.offset, entry.spec.shape);
    Tensor second = moments.second.view(entry.offset, entry.spec.shape);
    adamw_update(entry.value, entry.gradient, first, second, learning_rate,
                 entry.spec.weight_decay ? config.weight_decay : 0.0, step + 1, config);
  }
  return norm;
}

}  // namespace strata::executor
