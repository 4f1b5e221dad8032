// CUDA launchers of GELU (tanh approximation, ops/gelu.h), elementwise over n elements.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

void launch_gelu_forward(const void* x, void* y, std::int64_t n, ScalarType type);
// dx += dy·gelu'(x) when accumulate, else dx = dy·gelu'(x) (dx is not read).
void launch_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n, ScalarType type,
                          bool accumulate);

}  // namespace strata::executor::cuda
