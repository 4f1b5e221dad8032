#include "../../cuda/column_sums.cuh"
#include "../../cuda/device_math.cuh"
#include "rms_norm.cuh"

namespace strata::executor::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp each

template <class T, int Width>
__global__ void rms_norm_forward_kernel(const T* x, const T* weight, float epsilon, T* y,
                                        float* rstd_out, std::int64_t rows, std::int64_t hidden) {
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* in = x + row * hidden;
  float squares = 0.0f;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
#pragma unroll
    for (int k = 0; k < Width; ++k) squares += to_float(v.value[k]) * to_float(v.value[k]);
  }
  const float rstd = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(hidden) + epsilon);
  T* out = y + row * hidden;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
    const Vector<T, Width> gain = load_vector<T, Width>(weight + c);
    Vector<T, Width> result;
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      result.value[k] = from_float<T>(to_float(v.value[k]) * rstd * to_float(gain.value[k]));
    }
    store_vector(out + c, result);
  }
  if (lane == 0) rstd_out[row] = rstd;
}

template <class T, int Width>
__global__ void rms_norm_backward_input_kernel(const T* dy, const T* x, const T* weight,
                                               const float* rstd_in, T* dx, std::int64_t rows,
                                               std::int64_t hidden) {
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* in = x + row * hidden;
  const T* grad_out = dy + row * hidden;
  const float r = rstd_in[row];
  float projection_sum = 0.0f;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
    const Vector<T, Width> g = load_vector<T, Width>(grad_out + c);
    const Vector<T, Width> gain = load_vector<T, Width>(weight + c);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      projection_sum += to_float(g.value[k]) * to_float(gain.value[k]) * to_float(v.value[k]);
    }
  }
  const float projection_mean = warp_sum(projection_sum) / static_cast<float>(hidden);
  T* grad_in = dx + row * hidden;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
    const Vector<T, Width> g = load_vector<T, Width>(grad_out + c);
    const Vector<T, Width> gain = load_vector<T, Width>(weight + c);
    Vector<T, Width> result = load_vector<T, Width>(grad_in + c);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float scaled = to_float(g.value[k]) * to_float(gain.value[k]);
      result.value[k] =
          from_float<T>(to_float(result.value[k]) +
                        r * (scaled - to_float(v.value[k]) * (r * r * projection_mean)));
    }
    store_vector(grad_in + c, result);
  }
}

template <class T>
struct RmsNormWeightTerm {
  const T* dy;
  const T* x;
  const float* rstd;
  std::int64_t hidden;
  __device__ float2 operator()(std::int64_t row, std::int64_t column) const {
    const std::int64_t i = row * hidden + column;
    return make_float2(to_float(dy[i]) * to_float(x[i]) * rstd[row], 0.0f);
  }
};

}  // namespace

void launch_rms_norm_forward(const void* x, const void* weight, double epsilon, void* y,
                             float* rstd, std::int64_t rows, std::int64_t hidden, ScalarType type) {
  if (rows == 0) return;
  dispatch_cuda_type(type, "rms_norm_forward", [&]<class T>() {
    const auto launch = [&]<int Width>() {
      rms_norm_forward_kernel<T, Width>
          <<<ceil_div(rows, kRowsPerBlock), 32 * kRowsPerBlock, 0, current_stream()>>>(
              static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<float>(epsilon),
              static_cast<T*>(y), rstd, rows, hidden);
    };
    if (rows_vectorizable<T>(hidden, {x, weight, y})) {
      launch.template operator()<kVectorWidth<T>>();
    } else {
      launch.template operator()<1>();
    }
    STRATA_CUDA_CHECK_LAUNCH();
  });
}

void launch_rms_norm_backward(const void* dy, const void* x, const void* weight, const float* rstd,
                              void* dx, float* dweight, std::int64_t rows, std::int64_t hidden,
                              ScalarType type) {
  if (rows == 0) return;
  dispatch_cuda_type(type, "rms_norm_backward", [&]<class T>() {
    const auto launch = [&]<int Width>() {
      rms_norm_backward_input_kernel<T, Width>
          <<<ceil_div(rows, kRowsPerBlock), 32 * kRowsPerBlock, 0, current_stream()>>>(
              static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(weight),
              rstd, static_cast<T*>(dx), rows, hidden);
    };
    if (rows_vectorizable<T>(hidden, {dy, x, weight, dx})) {
      launch.template operator()<kVectorWidth<T>>();
    } else {
      launch.template operator()<1>();
    }
    STRATA_CUDA_CHECK_LAUNCH();
    launch_column_sums(
        rows, hidden,
        RmsNormWeightTerm<T>{static_cast<const T*>(dy), static_cast<const T*>(x), rstd, hidden},
        dweight, nullptr);
  });
}

}  // namespace strata::executor::cuda
