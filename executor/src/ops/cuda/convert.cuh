// CUDA launcher of ops/convert.h: float32 ↔ bfloat16 over n elements.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

void launch_convert(const void* source, ScalarType source_type, void* destination,
                    ScalarType destination_type, std::int64_t n);

}  // namespace strata::executor::cuda
