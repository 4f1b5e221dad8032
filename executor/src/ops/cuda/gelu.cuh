// CUDA launchers of GELU (tanh approximation, ops/gelu.h), elementwise over n elements.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

void launch_gelu_forward(const void* x, void* y, std::int64_t n, ScalarType type);
// dx += dy·gelu'(x).
void launch_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n, ScalarType type);

}  // namespace strata::executor::cuda
