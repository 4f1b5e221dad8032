// Learned absolute position embedding (GPT-2), forward and backward. Used by gpt models.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// x[b, t, :] += table[t, :] for x of shape [batch, seq, hidden] (in place).
void position_embedding_forward(const Tensor& table, Tensor& x);
// dtable[t, :] += Σ_b dx[b, t, :].
void position_embedding_backward(const Tensor& dx, Tensor& dtable);

// A sequence-parallel rank's share: x is [rows, hidden], rows [first_token, first_token + rows)
// of a micro-batch's [batch·seq] tokens, and row i has position (first_token + i) mod seq_length.
void position_embedding_forward_rows(const Tensor& table, Tensor& x, std::int64_t seq_length,
                                     std::int64_t first_token);
void position_embedding_backward_rows(const Tensor& dx, Tensor& dtable, std::int64_t seq_length,
                                      std::int64_t first_token);

}  // namespace strata::executor
