// CUDA launchers of the softmax cross-entropy (ops/cross_entropy.h): one block per row, logits
// in float32 or bfloat16 read once per pass in 16-byte vectors where aligned, statistics in
// float32.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

void launch_cross_entropy_forward(const void* logits, const std::int32_t* targets, float* losses,
                                  float* log_sum_exp, std::int64_t rows, std::int64_t vocab,
                                  ScalarType type);
void launch_cross_entropy_shard_statistics(const void* logits, const std::int32_t* targets,
                                           std::int64_t vocab_start, float* row_max,
                                           float* row_sum_exp, float* target_logit,
                                           std::int64_t rows, std::int64_t columns,
                                           ScalarType type);
// dlogits may alias logits.
void launch_cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                   const float* log_sum_exp, double loss_scale, void* dlogits,
                                   std::int64_t vocab_start, std::int64_t rows,
                                   std::int64_t columns, ScalarType type);

// The tensor-parallel loss between its two all-reduces, on `rows` float32 statistics:
// row_sum_exp[n] *= exp(row_max[n] − global_max[n]) (a shard's sum rescaled to the global max).
void launch_cross_entropy_rescale_shard_sums(const float* row_max, const float* global_max,
                                             float* row_sum_exp, std::int64_t rows);
// After them: log_sum_exp = global_max + log(sum_exp), losses = log_sum_exp − target_logit.
void launch_cross_entropy_shard_losses(const float* global_max, const float* sum_exp,
                                       const float* target_logit, float* losses, float* log_sum_exp,
                                       std::int64_t rows);

}  // namespace strata::executor::cuda
