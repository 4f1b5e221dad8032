// CUDA launchers of the learned position embedding (ops/position_embedding.h) for x of shape
// [batch, seq, hidden]: x and the table in float32 or bfloat16, the table's gradient in float32.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// x[b, t, :] += table[t, :].
void launch_position_embedding_forward(const void* table, void* x, std::int64_t batch,
                                       std::int64_t seq, std::int64_t hidden, ScalarType type);
// dtable[t, :] += Σ_b dx[b, t, :], summed over b in order.
void launch_position_embedding_backward(const void* dx, float* dtable, std::int64_t batch,
                                        std::int64_t seq, std::int64_t hidden, ScalarType type);

// The rows of a sequence-parallel rank: x is [rows, hidden] and row i has position
// (first_token + i) mod seq. x[i, :] += table[position, :].
void launch_position_embedding_forward_rows(const void* table, void* x, std::int64_t rows,
                                            std::int64_t hidden, std::int64_t seq,
                                            std::int64_t first_token, ScalarType type);
// dtable[p, :] += Σ dx[i, :] over the rows i at position p, summed in row order.
void launch_position_embedding_backward_rows(const void* dx, float* dtable, std::int64_t rows,
                                             std::int64_t hidden, std::int64_t seq,
                                             std::int64_t first_token, ScalarType type);

}  // namespace strata::executor::cuda
