// Deterministic float32 → float64 reductions on the device: a fixed grid of partial sums, then
// one block adding them in order, so the result never depends on the GPU or on scheduling. Used
// by the loss sum (ops/reduction.h) and the gradient norm (optim/gradient_clipping.h).
#pragma once

#include <cstdint>

namespace strata::executor::cuda {

// *result (device memory) = Σ values[i] (or Σ values[i]² when `squares`).
void launch_sum(const float* values, std::int64_t n, bool squares, double* result);

}  // namespace strata::executor::cuda
