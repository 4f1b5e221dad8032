// Deterministic column sums for parameter gradients that reduce over tokens (biases, norm gains):
// out[c] += Σ_rows term(row, c), up to two sums from one pass. Used by the linear, LayerNorm and
// RMSNorm launchers.
//
// Two launches instead of atomics, so that a run repeats bit for bit: each block sums a fixed
// chunk of rows for 256 columns into scratch[chunk][column], then one thread per column adds the
// chunks in order. The chunking depends only on the shape, never on the GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device_math.cuh"
#include "device_memory.h"

namespace strata::executor::cuda {

inline constexpr int kColumnSumThreads = 256;
inline constexpr std::int64_t kMaxRowChunks = 128;

// Term: a device functor float2 operator()(row, column) const; .x goes to first, .y to second.
template <class Term>
__global__ void column_partial_sums_kernel(std::int64_t rows, std::int64_t columns,
                                           std::int64_t rows_per_chunk, Term term,
                                           float2* partial) {
  const std::int64_t column = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (column >= columns) return;
  const std::int64_t first = blockIdx.y * rows_per_chunk;
  const std::int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  float2 sum = make_float2(0.0f, 0.0f);
#pragma unroll 8
  for (std::int64_t row = first; row < last; ++row) {
    const float2 value = term(row, column);
    sum.x += value.x;
    sum.y += value.y;
  }
  partial[blockIdx.y * columns + column] = sum;
}

static __global__ void column_sums_finish_kernel(const float2* partial, std::int64_t chunks,
                                                 std::int64_t columns, float* first,
                                                 float* second) {
  const std::int64_t column = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (column >= columns) return;
  float2 sum = make_float2(0.0f, 0.0f);
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const float2 value = partial[chunk * columns + column];
    sum.x += value.x;
    sum.y += value.y;
  }
  first[column] += sum.x;
  if (second != nullptr) second[column] += sum.y;
}

// The term of a plain column sum: row `row`, column `column` of values read as [rows, columns].
template <class T>
struct RowValues {
  const T* values;
  std::int64_t columns;
  __device__ float2 operator()(std::int64_t row, std::int64_t column) const {
    return make_float2(to_float(values[row * columns + column]), 0.0f);
  }
};

// first[c] += Σ term(row, c).x and, when second is not null, second[c] += Σ term(row, c).y.
template <class Term>
void launch_column_sums(std::int64_t rows, std::int64_t columns, const Term& term, float* first,
                        float* second) {
  if (rows == 0 || columns == 0) return;
  const std::int64_t chunks = rows < kMaxRowChunks ? rows : kMaxRowChunks;
  const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const std::int64_t used_chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  const cudaStream_t stream = current_stream();
  auto* partial = static_cast<float2*>(
      device_allocate(static_cast<std::size_t>(used_chunks * columns) * sizeof(float2)));
  const unsigned column_blocks =
      static_cast<unsigned>((columns + kColumnSumThreads - 1) / kColumnSumThreads);
  column_partial_sums_kernel<<<dim3(column_blocks, static_cast<unsigned>(used_chunks)),
                               kColumnSumThreads, 0, stream>>>(rows, columns, rows_per_chunk, term,
                                                               partial);
  STRATA_CUDA_CHECK_LAUNCH();
  column_sums_finish_kernel<<<column_blocks, kColumnSumThreads, 0, stream>>>(
      partial, used_chunks, columns, first, second);
  STRATA_CUDA_CHECK_LAUNCH();
  device_release(partial);  // stream-ordered: the next user of the block queues after these
}

}  // namespace strata::executor::cuda
