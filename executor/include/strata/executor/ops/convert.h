// Element-type conversion between tensors of one device: float32 master weights to their bfloat16
// working copy, bfloat16 tensors to float32 for checks and checkpoints. Used by ParameterStore
// and the CUDA tests; rounding is to nearest, ties to even, as the GPU rounds.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// destination[i] = source[i] in destination's type. Same element count and device; on CUDA
// float32 ↔ bfloat16 (and a plain copy for equal types), on the CPU any floating pair.
void convert(const Tensor& source, Tensor& destination);

}  // namespace strata::executor
