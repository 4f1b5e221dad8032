// CUDA launcher of the fused optimizer step (optim/optimizer_step.h): gradient clipping by a
// norm that stays on the device, AdamW in PyTorch's order over float32 master weights, gradients
// and moments, and the refresh of the bfloat16 working copy — one pass over every parameter.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// A run of parameter elements that share a weight decay (one parameter, or a piece of one).
struct AdamWChunk {
  std::int64_t first = 0;
  std::int32_t count = 0;
  float weight_decay = 0;
};

struct AdamWLaunch {
  float learning_rate = 0;
  float beta1 = 0, beta2 = 0, epsilon = 0;
  float step_size = 0;   // lr / (1 − β1ᵗ)
  float bias2_root = 0;  // √(1 − β2ᵗ)
  // Clipping: when norm_squared is not null and √norm_squared > max_norm > 0, gradients are
  // scaled by max_norm / (norm + 1e-6) as they are read.
  const double* norm_squared = nullptr;
  float max_norm = 0;
};

// Elements per chunk: one kernel block's share of the flat buffers.
inline constexpr std::int64_t kAdamWChunkElements = 32768;

// Appends the chunks of `count` elements from `first` that share `weight_decay`.
inline void append_adamw_chunks(std::vector<AdamWChunk>& chunks, std::int64_t first,
                                std::int64_t count, float weight_decay) {
  for (std::int64_t done = 0; done < count; done += kAdamWChunkElements) {
    const std::int64_t size =
        count - done < kAdamWChunkElements ? count - done : kAdamWChunkElements;
    chunks.push_back(AdamWChunk{first + done, static_cast<std::int32_t>(size), weight_decay});
  }
}

// The step-dependent constants of AdamW step t ≥ 1, computed in float64 as the CPU does.
inline AdamWLaunch adamw_launch(double learning_rate, double beta1, double beta2, double epsilon,
                                std::int64_t t) {
  AdamWLaunch launch;
  launch.learning_rate = static_cast<float>(learning_rate);
  launch.beta1 = static_cast<float>(beta1);
  launch.beta2 = static_cast<float>(beta2);
  launch.epsilon = static_cast<float>(epsilon);
  launch.step_size =
      static_cast<float>(learning_rate / (1.0 - std::pow(beta1, static_cast<double>(t))));
  launch.bias2_root = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(t))));
  return launch;
}

// chunks: device memory, `chunk_count` entries. compute_copy (may be null) receives the updated
// values in `compute_type`.
void launch_adamw(const AdamWChunk* chunks, std::int64_t chunk_count, float* values,
                  const float* gradients, float* first_moment, float* second_moment,
                  void* compute_copy, ScalarType compute_type, const AdamWLaunch& launch);

// y = x·scale over n float32 elements (clip_gradients).
void launch_scale(float* values, std::int64_t n, float scale);

}  // namespace strata::executor::cuda
