// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_). Used by the training loop
// before the optimizer step.
#pragma once

#include <span>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// √(Σ over all gradients of Σ g²), accumulated in float64.
double global_gradient_norm(std::span<const Tensor> gradients);
// The factor clipping scales gradients of global norm `norm` by: max_norm / (norm + 1e-6) when
// norm exceeds max_norm (PyTorch's rule), else 1. max_norm ≤ 0 disables clipping.
double clipping_scale(double norm, double max_norm);
// Scales every gradient by max_norm / (norm + 1e-6) when norm exceeds max_norm (PyTorch's rule);
// returns the norm before clipping. max_norm ≤ 0 disables clipping.
double clip_gradients(std::span<Tensor> gradients, double max_norm);

}  // namespace strata::executor
