// AdamW (Loshchilov & Hutter 2019) with decoupled weight decay, in PyTorch's update order. Used by
// the training loop, once per parameter per step.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double epsilon = 1e-8;
  double weight_decay = 0.1;  // applied to matrices only (see Transformer's parameter list)
};

// One step t ≥ 1 for one parameter, as torch.optim.AdamW does it:
//   p ← p·(1 − lr·λ);  m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g²;
//   p ← p − lr·(m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε)
// weight_decay is λ for this parameter (0 for biases and norms). gradient_scale is clipping's
// factor (clip_grad_norm_'s max_norm / (norm + 1e-6)), applied as g is read — the same numbers as
// scaling the gradient first, without a pass over it; the gradient itself is left unscaled.
void adamw_update(Tensor& parameter, const Tensor& gradient, Tensor& first_moment,
                  Tensor& second_moment, double learning_rate, double weight_decay,
                  std::int64_t step, const AdamWConfig& config, double gradient_scale = 1.0);

}  // namespace strata::executor
