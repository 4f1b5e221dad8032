#include "device_math.cuh"
#include "device_memory.h"
#include "reductions.cuh"

namespace strata::executor::cuda {
namespace {

constexpr int kPartialBlocks = 512;
constexpr int kThreads = 256;

__global__ void partial_sums_kernel(const float* values, std::int64_t n, bool squares,
                                    double* partial) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double value = values[i];
    sum += squares ? value * value : value;
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void finish_sum_kernel(const double* partial, int count, double* result) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partial[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) *result = sum;
}

}  // namespace

void launch_sum(const float* values, std::int64_t n, bool squares, double* result) {
  const cudaStream_t stream = current_stream();
  auto* partial = static_cast<double*>(device_allocate(kPartialBlocks * sizeof(double)));
  partial_sums_kernel<<<kPartialBlocks, kThreads, 0, stream>>>(values, n, squares, partial);
  STRATA_CUDA_CHECK_LAUNCH();
  finish_sum_kernel<<<1, kThreads, 0, stream>>>(partial, kPartialBlocks, result);
  STRATA_CUDA_CHECK_LAUNCH();
  device_release(partial);
}

}  // namespace strata::executor::cuda
