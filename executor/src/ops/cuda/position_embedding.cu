#include "../../cuda/device_math.cuh"
#include "position_embedding.cuh"

namespace strata::executor::cuda {
namespace {

template <class T>
__global__ void position_gradient_kernel(const T* dx, float* dtable, std::int64_t batch,
                                         std::int64_t seq_hidden) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < seq_hidden; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (std::int64_t b = 0; b < batch; ++b) sum += to_float(dx[b * seq_hidden + i]);
    dtable[i] += sum;
  }
}

// The table row of a sequence-parallel rank's row: position (first_token + row) mod seq.
struct RowPositionIndex {
  std::int64_t hidden;
  std::int64_t seq;
  std::int64_t first_token;
  __device__ std::int64_t operator()(std::int64_t i) const {
    const std::int64_t row = i / hidden;
    return ((first_token + row) % seq) * hidden + (i - row * hidden);
  }
};

// One thread per (position, column): the rows at that position are seq apart.
template <class T>
__global__ void row_position_gradient_kernel(const T* dx, float* dtable, std::int64_t rows,
                                             std::int64_t hidden, std::int64_t seq,
                                             std::int64_t first_token) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < seq * hidden; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t position = i / hidden;
    const std::int64_t column = i - position * hidden;
    const std::int64_t first_row = ((position - first_token) % seq + seq) % seq;
    if (first_row >= rows) continue;
    float sum = 0.0f;
    for (std::int64_t row = first_row; row < rows; row += seq) {
      sum += to_float(dx[row * hidden + column]);
    }
    dtable[i] += sum;
  }
}

}  // namespace

void launch_position_embedding_forward(const void* table, void* x, std::int64_t batch,
                                       std::int64_t seq, std::int64_t hidden, ScalarType type) {
  dispatch_cuda_type(type, "position_embedding_forward", [&]<class T>() {
    launch_vector_loop<T>(batch * seq * hidden, rows_vectorizable<T>(hidden, {table, x}),
                          AddFromSource<T, RepeatingIndex>{
                              static_cast<const T*>(table), static_cast<T*>(x), {seq * hidden}});
  });
}

void launch_position_embedding_backward(const void* dx, float* dtable, std::int64_t batch,
                                        std::int64_t seq, std::int64_t hidden, ScalarType type) {
  if (seq * hidden == 0) return;
  dispatch_cuda_type(type, "position_embedding_backward", [&]<class T>() {
    position_gradient_kernel<T><<<grid_blocks(seq * hidden, 256), 256, 0, current_stream()>>>(
        static_cast<const T*>(dx), dtable, batch, seq * hidden);
    STRATA_CUDA_CHECK_LAUNCH();
  });
}

void launch_position_embedding_forward_rows(const void* table, void* x, std::int64_t rows,
                                            std::int64_t hidden, std::int64_t seq,
                                            std::int64_t first_token, ScalarType type) {
  dispatch_cuda_type(type, "position_embedding_forward_rows", [&]<class T>() {
    launch_vector_loop<T>(
        rows * hidden, rows_vectorizable<T>(hidden, {table, x}),
        AddFromSource<T, RowPositionIndex>{
            static_cast<const T*>(table), static_cast<T*>(x), {hidden, seq, first_token}});
  });
}

void launch_position_embedding_backward_rows(const void* dx, float* dtable, std::int64_t rows,
                                             std::int64_t hidden, std::int64_t seq,
                                             std::int64_t first_token, ScalarType type) {
  if (rows * hidden == 0) return;
  dispatch_cuda_type(type, "position_embedding_backward_rows", [&]<class T>() {
    row_position_gradient_kernel<T><<<grid_blocks(seq * hidden, 256), 256, 0, current_stream()>>>(
        static_cast<const T*>(dx), dtable, rows, hidden, seq, first_token);
    STRATA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace strata::executor::cuda
