// The fused AdamW kernel's chunk table (cuda/adamw.cuh) copied to the device. Private to
// src/optim: adamw.cpp and optimizer_step.cpp both launch the kernel.
#pragma once

#include <vector>

#include "cuda/adamw.cuh"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

Tensor upload_chunks(const std::vector<cuda::AdamWChunk>& chunks);

}  // namespace strata::executor
