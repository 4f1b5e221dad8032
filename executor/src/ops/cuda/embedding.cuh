// CUDA launchers of the token embedding (ops/embedding.h): table and out in float32 or
// bfloat16, the table's gradient in float32. Ids outside [0, vocab) are skipped (the token file
// reader refuses them before they get here).
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

void launch_embedding_forward(const std::int32_t* ids, const void* table, void* out,
                              std::int64_t tokens, std::int64_t hidden, std::int64_t vocab,
                              ScalarType type);
// The vocabulary-parallel lookup: `table` holds rows [first_id, first_id + rows) of the whole
// table; an id outside them gives a zero row.
void launch_vocab_parallel_embedding_forward(const std::int32_t* ids, const void* table,
                                             std::int64_t first_id, std::int64_t rows, void* out,
                                             std::int64_t tokens, std::int64_t hidden,
                                             ScalarType type);
// dtable[ids[n]] += dout[n], deterministic: the ids are sorted (CUB radix sort, stable) and each
// distinct id sums its rows in token order.
void launch_embedding_backward(const std::int32_t* ids, const void* dout, float* dtable,
                               std::int64_t tokens, std::int64_t hidden, std::int64_t vocab,
                               ScalarType type);
// The same for dtable holding rows [first_id, first_id + rows) of the whole table's gradient;
// other ids are skipped.
void launch_vocab_parallel_embedding_backward(const std::int32_t* ids, const void* dout,
                                              float* dtable, std::int64_t first_id,
                                              std::int64_t rows, std::int64_t tokens,
                                              std::int64_t hidden, ScalarType type);

}  // namespace strata::executor::cuda
