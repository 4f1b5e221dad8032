// Device-side building blocks shared by the CUDA ops: float32/bfloat16 conversion, vectors of
// elements moved as one 16-byte access, warp and block reductions, the launch shape of
// elementwise loops and the host-side dispatch from ScalarType to the element type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "cuda_check.h"
#include "cuda_context.h"
#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_float(float value) { return value; }
__device__ __forceinline__ float to_float(bf16 value) { return __bfloat162float(value); }

template <class T>
__device__ __forceinline__ T from_float(float value);
template <>
__device__ __forceinline__ float from_float<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float value) {
  return __float2bfloat16(value);
}

// Width consecutive elements, loaded and stored as one access (16 bytes when Width·sizeof(T)
// is 16).
template <class T, int Width>
struct alignas(sizeof(T) * Width) Vector {
  T value[Width];
};
template <class T, int Width>
__device__ __forceinline__ Vector<T, Width> load_vector(const T* pointer) {
  return *reinterpret_cast<const Vector<T, Width>*>(pointer);
}
template <class T, int Width>
__device__ __forceinline__ void store_vector(T* pointer, const Vector<T, Width>& vector) {
  *reinterpret_cast<Vector<T, Width>*>(pointer) = vector;
}

// Elements of T in one 16-byte access.
template <class T>
inline constexpr int kVectorWidth = static_cast<int>(16 / sizeof(T));

inline bool aligned_16(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

// True when rows of `row_elements` elements of T, starting at each (non-null) pointer, can be
// read and written in 16-byte vectors.
template <class T>
bool rows_vectorizable(std::int64_t row_elements, std::initializer_list<const void*> pointers) {
  if (row_elements % kVectorWidth<T> != 0) return false;
  for (const void* pointer : pointers) {
    if (pointer != nullptr && !aligned_16(pointer)) return false;
  }
  return true;
}

inline unsigned ceil_div(std::int64_t items, std::int64_t per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

template <class T>
__device__ __forceinline__ T warp_sum(T value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  }
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
  }
  return value;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 values of shared memory.
template <class T>
__device__ T block_sum(T value, T* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : T(0);
  return warp_sum(value);
}

__device__ __forceinline__ float block_max(float value, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  value = warp_max(value);
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(value);
}

// Blocks for a grid-stride loop over `items`: enough to fill the GPU several times over, never
// more than the items need.
inline unsigned grid_blocks(std::int64_t items, int threads) {
  const std::int64_t needed = (items + threads - 1) / threads;
  const std::int64_t filling =
      static_cast<std::int64_t>(cuda_context().streaming_multiprocessors) * 16;
  const std::int64_t blocks = needed < filling ? needed : filling;
  return static_cast<unsigned>(blocks > 0 ? blocks : 1);
}

// Calls function.template operator()<Width>(i) for i = 0, Width, 2·Width, … < n, where the
// function handles elements [i, i + Width). Width is the 16-byte vector when every pointer the
// caller names is 16-byte aligned and n is a multiple of it, else 1.
template <int Width, class Function>
__global__ void vector_loop_kernel(std::int64_t vectors, Function function) {
  for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       v < vectors; v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    function.template operator()<Width>(v * Width);
  }
}

// For launch_vector_loop: y[i] += source[index(i)], where `index` maps y's element i (the first of
// a vector within one row) to the source element of the same column — a bias added to every row,
// a position embedding to every sequence. Source rows are read as often as they are added.
template <class T, class SourceIndex>
struct AddFromSource {
  const T* source;
  T* y;
  SourceIndex index;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> added = load_vector<T, Width>(source + index(i));
    Vector<T, Width> value = load_vector<T, Width>(y + i);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      value.value[k] = from_float<T>(to_float(value.value[k]) + to_float(added.value[k]));
    }
    store_vector(y + i, value);
  }
};

// The index of a source repeated every `period` elements of y (a bias row, a table of positions).
struct RepeatingIndex {
  std::int64_t period;
  __device__ std::int64_t operator()(std::int64_t i) const { return i % period; }
};

template <class T, class Function>
void launch_vector_loop(std::int64_t n, bool all_aligned, const Function& function) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const cudaStream_t stream = current_stream();
  if (all_aligned && n % kVectorWidth<T> == 0) {
    const std::int64_t vectors = n / kVectorWidth<T>;
    vector_loop_kernel<kVectorWidth<T>>
        <<<grid_blocks(vectors, kThreads), kThreads, 0, stream>>>(vectors, function);
  } else {
    vector_loop_kernel<1><<<grid_blocks(n, kThreads), kThreads, 0, stream>>>(n, function);
  }
  STRATA_CUDA_CHECK_LAUNCH();
}

// Calls function.template operator()<T>() with T = float or __nv_bfloat16 for `type`.
template <class Function>
void dispatch_cuda_type(ScalarType type, const char* op, Function&& function) {
  switch (type) {
    case ScalarType::float32:
      function.template operator()<float>();
      return;
    case ScalarType::bfloat16:
      function.template operator()<bf16>();
      return;
    default:
      fail_unsupported(op, "the CUDA backend computes in float32 or bfloat16");
  }
}

}  // namespace strata::executor::cuda
