// One optimizer step over a whole ParameterStore: global-norm clipping, then AdamW per parameter
// (weight decay on the parameters that ask for it). Used by the trainer, the PyTorch reference
// export and the training-step benchmark, so all three run the same update.
#pragma once

#include <cstdint>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/optim/adamw.h"

namespace strata::executor {

struct OptimizerMoments {
  Tensor first;   // AdamW m, same layout as the parameters' flat buffer
  Tensor second;  // AdamW v

  static OptimizerMoments zeros_like(const ParameterStore& parameters);
};

// Clips the gradients to max_gradient_norm (≤ 0: no clipping), applies AdamW step t = step + 1
// with `learning_rate`, and returns the gradient norm before clipping.
double optimizer_step(ParameterStore& parameters, OptimizerMoments& moments, double learning_rate,
                      std::int64_t step, const AdamWConfig& config, double max_gradient_norm);

// AdamW step t = step + 1 over every parameter of a host store whose gradients read as
// `gradient_scale` × themselves (clipping's factor, applied as they are read: they stay unscaled).
// What optimizer_step does after the norm, for a caller that summed the norm over ranks itself.
void apply_adamw(ParameterStore& parameters, OptimizerMoments& moments, double learning_rate,
                 std::int64_t step, const AdamWConfig& config, double gradient_scale);

}  // namespace strata::executor
