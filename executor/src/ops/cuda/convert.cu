#include "../../cuda/device_math.cuh"
#include "convert.cuh"

namespace strata::executor::cuda {
namespace {

template <class From, class To>
__global__ void convert_kernel(const From* source, To* destination, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    destination[i] = from_float<To>(to_float(source[i]));
  }
}

}  // namespace

void launch_convert(const void* source, ScalarType source_type, void* destination,
                    ScalarType destination_type, std::int64_t n) {
  if (n == 0) return;
  dispatch_cuda_type(source_type, "convert", [&]<class From>() {
    dispatch_cuda_type(destination_type, "convert", [&]<class To>() {
      convert_kernel<From, To><<<grid_blocks(n, 256), 256, 0, current_stream()>>>(
          static_cast<const From*>(source), static_cast<To*>(destination), n);
      STRATA_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace strata::executor::cuda
