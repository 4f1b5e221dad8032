// A block of columns of a row-major matrix, copied out and written back: how a per-head op (the
// query/key norm) gets the contiguous [rows · heads, head_dim] view of some heads of the fused
// qkv projection's rows. CPU backend.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// block [rows, c] = x[:, first, first + c) for x seen as [rows, width] and c = block.numel() /
// rows.
void copy_column_block(const Tensor& x, std::int64_t width, std::int64_t first, Tensor& block);
// x[:, first, first + c) = block: the inverse of copy_column_block.
void write_column_block(const Tensor& block, std::int64_t width, std::int64_t first, Tensor& x);

}  // namespace strata::executor
