// CUDA launchers of the residual add (ops/residual.h): elementwise over n elements of float32 or
// bfloat16, on the backend's stream.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// y = a + b; y may alias a or b.
void launch_residual_forward(const void* a, const void* b, void* y, std::int64_t n,
                             ScalarType type);
// da += dy and db += dy.
void launch_residual_backward(const void* dy, void* da, void* db, std::int64_t n, ScalarType type);

}  // namespace strata::executor::cuda
