// The sum of a tensor's elements in float64, on the host: the step's loss from the per-token
// losses. Used by the model; on CUDA the sum is taken on the device in a fixed order.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// float32/float64 values on the CPU, float32 on CUDA.
double sum_of(const Tensor& values);

}  // namespace strata::executor
