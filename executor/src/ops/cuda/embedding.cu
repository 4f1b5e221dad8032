#include <cub/device/device_radix_sort.cuh>

#include "../../cuda/device_math.cuh"
#include "../../cuda/device_memory.h"
#include "embedding.cuh"

namespace strata::executor::cuda {
namespace {

template <class T>
struct EmbeddingGather {
  const std::int32_t* ids;
  const T* table;
  T* out;
  std::int64_t hidden;
  std::int64_t first_id;
  std::int64_t vocab;  // rows of `table`
  bool zero_outside;   // an id outside the rows writes zeros (vocabulary-parallel) or nothing
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t token = i / hidden;
    const std::int64_t column = i - token * hidden;
    const std::int64_t row = ids[token] - first_id;
    if (row < 0 || row >= vocab) {
      if (zero_outside) {
        Vector<T, Width> zeros;
#pragma unroll
        for (int k = 0; k < Width; ++k) zeros.value[k] = from_float<T>(0.0f);
        store_vector(out + i, zeros);
      }
      return;
    }
    store_vector(out + i, load_vector<T, Width>(table + row * hidden + column));
  }
};

__global__ void positions_kernel(std::uint32_t* positions, std::int64_t tokens) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < tokens; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    positions[i] = static_cast<std::uint32_t>(i);
  }
}

// One block per sorted token; the block of the first token of each id sums that id's rows.
template <class T>
__global__ void embedding_segment_sum_kernel(const std::uint32_t* sorted_ids,
                                             const std::uint32_t* sorted_positions, const T* dout,
                                             float* dtable, std::int64_t tokens,
                                             std::int64_t hidden, std::int64_t first_id,
                                             std::int64_t vocab) {
  const std::int64_t first = blockIdx.x;
  const std::uint32_t id = sorted_ids[first];
  if (first > 0 && sorted_ids[first - 1] == id) return;
  const std::int64_t row = static_cast<std::int64_t>(id) - first_id;
  if (row < 0 || row >= vocab) return;
  for (std::int64_t column = threadIdx.x; column < hidden; column += blockDim.x) {
    float sum = 0.0f;
    for (std::int64_t j = first; j < tokens && sorted_ids[j] == id; ++j) {
      sum += to_float(dout[static_cast<std::int64_t>(sorted_positions[j]) * hidden + column]);
    }
    dtable[row * hidden + column] += sum;
  }
}

int bits_for(std::int64_t vocab) {
  int bits = 1;
  while (bits < 32 && (std::int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

}  // namespace

void launch_embedding_forward(const std::int32_t* ids, const void* table, void* out,
                              std::int64_t tokens, std::int64_t hidden, std::int64_t vocab,
                              ScalarType type) {
  dispatch_cuda_type(type, "embedding_forward", [&]<class T>() {
    launch_vector_loop<T>(tokens * hidden, rows_vectorizable<T>(hidden, {table, out}),
                          EmbeddingGather<T>{ids, static_cast<const T*>(table),
                                             static_cast<T*>(out), hidden, 0, vocab, false});
  });
}

void launch_vocab_parallel_embedding_forward(const std::int32_t* ids, const void* table,
                                             std::int64_t first_id, std::int64_t rows, void* out,
                                             std::int64_t tokens, std::int64_t hidden,
                                             ScalarType type) {
  dispatch_cuda_type(type, "vocab_parallel_embedding_forward", [&]<class T>() {
    launch_vector_loop<T>(tokens * hidden, rows_vectorizable<T>(hidden, {table, out}),
                          EmbeddingGather<T>{ids, static_cast<const T*>(table),
                                             static_cast<T*>(out), hidden, first_id, rows, true});
  });
}

namespace {

// dtable[id − first_id] += dout[n] for ids in [first_id, first_id + rows), sorting the ids on
// their low `end_bit` bits (every id must be below 2^end_bit).
void sorted_embedding_backward(const std::int32_t* ids, const void* dout, float* dtable,
                               std::int64_t first_id, std::int64_t rows, std::int64_t tokens,
                               std::int64_t hidden, int end_bit, ScalarType type) {
  if (tokens == 0) return;
  const cudaStream_t stream = current_stream();
  const std::size_t id_bytes = static_cast<std::size_t>(tokens) * sizeof(std::uint32_t);
  auto* positions = static_cast<std::uint32_t*>(device_allocate(id_bytes));
  auto* sorted_ids = static_cast<std::uint32_t*>(device_allocate(id_bytes));
  auto* sorted_positions = static_cast<std::uint32_t*>(device_allocate(id_bytes));
  positions_kernel<<<grid_blocks(tokens, 256), 256, 0, stream>>>(positions, tokens);
  STRATA_CUDA_CHECK_LAUNCH();
  const auto* keys = reinterpret_cast<const std::uint32_t*>(ids);
  std::size_t scratch_bytes = 0;
  STRATA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes, keys, sorted_ids,
                                                    positions, sorted_positions,
                                                    static_cast<int>(tokens), 0, end_bit, stream));
  void* scratch = device_allocate(scratch_bytes > 0 ? scratch_bytes : 1);
  STRATA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch, scratch_bytes, keys, sorted_ids,
                                                    positions, sorted_positions,
                                                    static_cast<int>(tokens), 0, end_bit, stream));
  dispatch_cuda_type(type, "embedding_backward", [&]<class T>() {
    const int threads = hidden >= 256 ? 256 : 32 * static_cast<int>((hidden + 31) / 32);
    embedding_segment_sum_kernel<T><<<static_cast<unsigned>(tokens), threads, 0, stream>>>(
        sorted_ids, sorted_positions, static_cast<const T*>(dout), dtable, tokens, hidden, first_id,
        rows);
    STRATA_CUDA_CHECK_LAUNCH();
  });
  for (void* block : {static_cast<void*>(positions), static_cast<void*>(sorted_ids),
                      static_cast<void*>(sorted_positions), scratch}) {
    device_release(block);
  }
}

}  // namespace

void launch_embedding_backward(const std::int32_t* ids, const void* dout, float* dtable,
                               std::int64_t tokens, std::int64_t hidden, std::int64_t vocab,
                               ScalarType type) {
  sorted_embedding_backward(ids, dout, dtable, 0, vocab, tokens, hidden, bits_for(vocab), type);
}

void launch_vocab_parallel_embedding_backward(const std::int32_t* ids, const void* dout,
                                              float* dtable, std::int64_t first_id,
                                              std::int64_t rows, std::int64_t tokens,
                                              std::int64_t hidden, ScalarType type) {
  // Other ranks' ids are larger than this shard's rows: sort on every bit an int32 id can have.
  sorted_embedding_backward(ids, dout, dtable, first_id, rows, tokens, hidden, 31, type);
}

}  // namespace strata::executor::cuda
