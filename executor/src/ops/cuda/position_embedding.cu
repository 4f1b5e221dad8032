#include "../../cuda/device_math.cuh"
#include "position_embedding.cuh"

namespace strata::executor::cuda {
namespace {

template <class T>
struct AddPositions {
  const T* table;
  T* x;
  std::int64_t seq_hidden;  // elements of one sequence
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> position = load_vector<T, Width>(table + i % seq_hidden);
    Vector<T, Width> value = load_vector<T, Width>(x + i);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      value.value[k] = from_float<T>(to_float(value.value[k]) + to_float(position.value[k]));
    }
    store_vector(x + i, value);
  }
};

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

template <class T>
struct AddRowPositions {
  const T* table;
  T* x;
  std::int64_t hidden;
  std::int64_t seq;
  std::int64_t first_token;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t row = i / hidden;
    const std::int64_t column = i - row * hidden;
    const std::int64_t position = (first_token + row) % seq;
    const Vector<T, Width> added = load_vector<T, Width>(table + position * hidden + column);
    Vector<T, Width> value = load_vector<T, Width>(x + i);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      value.value[k] = from_float<T>(to_float(value.value[k]) + to_float(added.value[k]));
    }
    store_vector(x + i, value);
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
    launch_vector_loop<T>(
        batch * seq * hidden, rows_vectorizable<T>(hidden, {table, x}),
        AddPositions<T>{static_cast<const T*>(table), static_cast<T*>(x), seq * hidden});
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
    launch_vector_loop<T>(rows * hidden, rows_vectorizable<T>(hidden, {table, x}),
                          AddRowPositions<T>{static_cast<const T*>(table), static_cast<T*>(x),
                                             hidden, seq, first_token});
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
