// Rotary position embedding (Su et al. 2021), forward and backward, in the rotate-half layout of
// Hugging Face's and Megatron's Llama: the pair (i, i + d/2) of each head turns by t·θ^(−2i/d).
// Used by llama models on the q and k heads of the fused qkv projection.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// x is [batch, seq, width]; heads 0 .. num_heads−1 of each row (head_dim columns each, from
// column 0) turn in place by the angle of the row's position first_position + t. Other columns
// are left alone, so the q and k heads of a [q | k | v] row turn in one call. A context-parallel
// rank's rows start at their chunk's position (first_position > 0: CPU backend only).
void rotary_forward(Tensor& x, std::int64_t num_heads, std::int64_t head_dim, double theta,
                    std::int64_t first_position = 0);
// The transpose of the rotation (turning back by the same angle), in place on the gradient.
void rotary_backward(Tensor& dx, std::int64_t num_heads, std::int64_t head_dim, double theta,
                     std::int64_t first_position = 0);

}  // namespace strata::executor
