#include "../../cuda/counter_random.cuh"
#include "../../cuda/device_math.cuh"
#include "dropout.cuh"

namespace strata::executor::cuda {
namespace {

template <class T>
__global__ void dropout_kernel(const T* in, T* out, std::int64_t rows, std::int64_t features,
                               DropoutLaunch mask, float keep_scale, bool accumulate) {
  const std::int64_t total = rows * features;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / features;
    const std::int64_t column = i - row * features;
    const std::uint64_t index = static_cast<std::uint64_t>(mask.first_token + row) *
                                    static_cast<std::uint64_t>(mask.total_features) +
                                static_cast<std::uint64_t>(mask.first_feature + column);
    const bool keep = counter_uniform(mask.seed, mask.stream, index) > mask.probability;
    const float value = keep ? to_float(in[i]) * keep_scale : 0.0f;
    out[i] = from_float<T>(accumulate ? to_float(out[i]) + value : value);
  }
}

}  // namespace

void launch_dropout(const void* in, void* out, std::int64_t rows, std::int64_t features,
                    const DropoutLaunch& mask, bool accumulate, ScalarType type) {
  if (rows * features == 0) return;
  const float keep_scale = static_cast<float>(1.0 / (1.0 - mask.probability));
  dispatch_cuda_type(type, "dropout", [&]<class T>() {
    constexpr int kThreads = 256;
    dropout_kernel<T><<<grid_blocks(rows * features, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<const T*>(in), static_cast<T*>(out), rows, features, mask, keep_scale,
        accumulate);
    STRATA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace strata::executor::cuda
