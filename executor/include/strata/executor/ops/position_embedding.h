// Learned absolute position embedding (GPT-2), forward and backward. Used by gpt models.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// x[b, t, :] += table[t, :] for x of shape [batch, seq, hidden] (in place).
void position_embedding_forward(const Tensor& table, Tensor& x);
// dtable[t, :] += Σ_b dx[b, t, :].
void position_embedding_backward(const Tensor& dx, Tensor& dtable);

}  // namespace strata::executor
