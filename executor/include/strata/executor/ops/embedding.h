// Token embedding lookup, forward and backward. Used by the model's first stage (and, tied, by the
// LM head's weight).
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// out[n, :] = table[ids[n], :]; ids are int32 in [0, vocab), out is [n, hidden].
void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out);
// dtable[ids[n], :] += dout[n, :].
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);

}  // namespace strata::executor
