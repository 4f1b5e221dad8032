// Blocks of columns of a row-major matrix, copied out and written back: how a per-head op (the
// query/key norm) gets the contiguous [rows · heads, head_dim] view of some heads of the fused
// qkv projection's rows, and latent attention the rotary part of every head. CPU backend.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// block [rows, c] = x[:, first, first + c) for x seen as [rows, width] and c = block.numel() /
// rows.
void copy_column_block(const Tensor& x, std::int64_t width, std::int64_t first, Tensor& block);
// x[:, first, first + c) = block: the inverse of copy_column_block.
void write_column_block(const Tensor& block, std::int64_t width, std::int64_t first, Tensor& x);

// The same `count` columns of each of `heads` heads `stride` columns apart (head h's at
// first + h·stride): block [rows, heads · count] = those columns of x seen as [rows, width], and
// its inverse.
void copy_head_columns(const Tensor& x, std::int64_t width, std::int64_t first, std::int64_t stride,
                       std::int64_t heads, Tensor& block);
void write_head_columns(const Tensor& block, std::int64_t width, std::int64_t first,
                        std::int64_t stride, std::int64_t heads, Tensor& x);

}  // namespace strata::executor
