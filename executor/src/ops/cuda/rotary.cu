#include "../../cuda/device_math.cuh"
#include "rotary.cuh"

namespace strata::executor::cuda {
namespace {

template <class T>
__global__ void rotary_kernel(T* x, std::int64_t rows, std::int64_t seq, std::int64_t width,
                              std::int64_t num_heads, std::int64_t head_dim, double theta,
                              int direction) {
  const std::int64_t half = head_dim / 2;
  const std::int64_t pairs = rows * num_heads * half;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = p % half;
    const std::int64_t head = (p / half) % num_heads;
    const std::int64_t row = p / (half * num_heads);
    const std::int64_t t = row % seq;
    const double angle = static_cast<double>(t) *
                         pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    double sine, cosine;
    sincos(angle, &sine, &cosine);
    const float c = static_cast<float>(cosine);
    const float s = static_cast<float>(direction * sine);
    T* first = x + row * width + head * head_dim + i;
    T* second = first + half;
    const float a = to_float(*first);
    const float b = to_float(*second);
    *first = from_float<T>(a * c - b * s);
    *second = from_float<T>(b * c + a * s);
  }
}

}  // namespace

void launch_rotary(void* x, std::int64_t batch, std::int64_t seq, std::int64_t width,
                   std::int64_t num_heads, std::int64_t head_dim, double theta, int direction,
                   ScalarType type) {
  const std::int64_t pairs = batch * seq * num_heads * (head_dim / 2);
  if (pairs == 0) return;
  dispatch_cuda_type(type, "rotary", [&]<class T>() {
    rotary_kernel<T><<<grid_blocks(pairs, 256), 256, 0, current_stream()>>>(
        static_cast<T*>(x), batch * seq, seq, width, num_heads, head_dim, theta, direction);
    STRATA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace strata::executor::cuda
