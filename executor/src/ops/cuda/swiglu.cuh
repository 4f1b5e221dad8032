// CUDA launchers of SwiGLU (ops/swiglu.h), elementwise over n elements.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// y = silu(gate)·up.
void launch_swiglu_forward(const void* gate, const void* up, void* y, std::int64_t n,
                           ScalarType type);
// dgate += dy·up·σ(g)(1 + g(1 − σ(g))), dup += dy·silu(g).
void launch_swiglu_backward(const void* dy, const void* gate, const void* up, void* dgate,
                            void* dup, std::int64_t n, ScalarType type);

}  // namespace strata::executor::cuda
