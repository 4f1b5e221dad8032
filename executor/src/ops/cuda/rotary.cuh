// CUDA launcher of the rotary embedding (ops/rotary.h) on x [batch, seq, width], in place: the
// first num_heads heads of each row turn by the row's position. Angles in float64, as the CPU
// computes them, then rounded once.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// direction +1 rotates forward, −1 backward (the transpose).
void launch_rotary(void* x, std::int64_t batch, std::int64_t seq, std::int64_t width,
                   std::int64_t num_heads, std::int64_t head_dim, double theta, int direction,
                   ScalarType type);

}  // namespace strata::executor::cuda
