// Softmax cross-entropy over the vocabulary, forward and backward, for the whole vocabulary or
// for a shard of it (vocab-parallel loss: each rank holds columns [vocab_start, vocab_start +
// shard) and the per-row statistics are combined across ranks, so no rank gathers the logits).
// Used by the LM head's loss.
//
// logits are [n, columns] (float32/float64 on the CPU; float32 or bfloat16 on CUDA), targets int32
// [n] indices into the whole vocabulary; the statistics, losses and log-sum-exps are float32 on
// CUDA (the logits' type on the CPU).
#pragma once

#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// The whole vocabulary: losses[n] = lse[n] − logits[n, targets[n]] with
// lse[n] = log Σ_v exp(logits[n, v]), kept for the backward.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses,
                           Tensor& log_sum_exp);

// One shard's part: row_max[n] = max_v logits[n, v], row_sum_exp[n] = Σ_v exp(logits[n, v] −
// row_max[n]) and target_logit[n] = logits[n, targets[n] − vocab_start] when the target falls in
// the shard, else 0. Across shards: M = max row_max, lse = M + log Σ row_sum_exp·exp(row_max −
// M), loss = lse − Σ target_logit.
void cross_entropy_shard_statistics(const Tensor& logits, const Tensor& targets,
                                    std::int64_t vocab_start, Tensor& row_max, Tensor& row_sum_exp,
                                    Tensor& target_logit);

// Combining the shards' statistics once the row maxima are all-reduced (max) into global_max:
// row_sum_exp[n] ← row_sum_exp[n]·exp(row_max[n] − global_max[n]), this shard's part of
// Σ_v exp(logits[n, v] − M) — then, once those and the target logits are all-reduced (sum),
// log_sum_exp = global_max + log(sum_exp) and losses = log_sum_exp − target_logit.
void cross_entropy_rescale_shard_sums(const Tensor& row_max, const Tensor& global_max,
                                      Tensor& row_sum_exp);
void cross_entropy_shard_losses(const Tensor& global_max, const Tensor& sum_exp,
                                const Tensor& target_logit, Tensor& losses, Tensor& log_sum_exp);

// dlogits[n, v] = loss_scale·(exp(logits[n, v] − lse[n]) − [vocab_start + v = targets[n]]),
// the gradient of loss_scale·Σ losses. Overwrites dlogits, which may be logits itself (the
// logits are not needed after it: that saves the memory of one [n, vocabulary] tensor).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& log_sum_exp,
                            double loss_scale, Tensor& dlogits, std::int64_t vocab_start = 0);

}  // namespace strata::executor
