#include "../../cuda/device_math.cuh"
#include "adamw.cuh"

namespace strata::executor::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void adamw_kernel(const AdamWChunk* chunks, float* values, const float* gradients,
                             float* first_moment, float* second_moment, T* compute_copy,
                             AdamWLaunch launch) {
  const AdamWChunk chunk = chunks[blockIdx.x];
  float clip = 1.0f;
  if (launch.norm_squared != nullptr && launch.max_norm > 0.0f) {
    const double norm = sqrt(*launch.norm_squared);
    if (norm > launch.max_norm) clip = static_cast<float>(launch.max_norm / (norm + 1e-6));
  }
  const float decay = 1.0f - launch.learning_rate * chunk.weight_decay;
  for (std::int64_t i = chunk.first + threadIdx.x; i < chunk.first + chunk.count; i += kThreads) {
    const float g = gradients[i] * clip;
    const float m = launch.beta1 * first_moment[i] + (1.0f - launch.beta1) * g;
    const float v = launch.beta2 * second_moment[i] + (1.0f - launch.beta2) * (g * g);
    const float p =
        values[i] * decay - launch.step_size * m / (sqrtf(v) / launch.bias2_root + launch.epsilon);
    first_moment[i] = m;
    second_moment[i] = v;
    values[i] = p;
    if (compute_copy != nullptr) compute_copy[i] = from_float<T>(p);
  }
}

__global__ void scale_kernel(float* values, std::int64_t n, float scale) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    values[i] *= scale;
  }
}

}  // namespace

void launch_adamw(const AdamWChunk* chunks, std::int64_t chunk_count, float* values,
                  const float* gradients, float* first_moment, float* second_moment,
                  void* compute_copy, ScalarType compute_type, const AdamWLaunch& launch) {
  if (chunk_count == 0) return;
  dispatch_cuda_type(compute_type, "adamw", [&]<class T>() {
    adamw_kernel<T><<<static_cast<unsigned>(chunk_count), kThreads, 0, current_stream()>>>(
        chunks, values, gradients, first_moment, second_moment, static_cast<T*>(compute_copy),
        launch);
    STRATA_CUDA_CHECK_LAUNCH();
  });
}

void launch_scale(float* values, std::int64_t n, float scale) {
  if (n == 0) return;
  scale_kernel<<<grid_blocks(n, kThreads), kThreads, 0, current_stream()>>>(values, n, scale);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::executor::cuda
