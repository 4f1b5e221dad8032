// Token embedding lookup, forward and backward. Used by the model's first stage (and, tied, by the
// LM head's weight).
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// out[n, :] = table[ids[n], :]; ids are int32 in [0, vocab), out is [n, hidden].
void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out);
// dtable[ids[n], :] += dout[n, :].
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);

// The vocabulary-parallel lookup of a rank holding rows [vocab_start, vocab_start + rows) of the
// table (Megatron's VocabParallelEmbedding): ids outside them give zero rows, so the sum of every
// rank's `out` is the whole lookup; backward touches only the shard's rows.
void vocab_parallel_embedding_forward(const Tensor& ids, const Tensor& table_shard,
                                      std::int64_t vocab_start, Tensor& out);
void vocab_parallel_embedding_backward(const Tensor& ids, const Tensor& dout,
                                       std::int64_t vocab_start, Tensor& dtable_shard);

}  // namespace strata::executor
