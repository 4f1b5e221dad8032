#include "../../cuda/column_sums.cuh"
#include "../../cuda/device_math.cuh"
#include "layer_norm.cuh"

namespace strata::executor::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp each

template <class T, int Width>
__global__ void layer_norm_forward_kernel(const T* x, const T* weight, const T* bias, float epsilon,
                                          T* y, float* mean_out, float* rstd_out, std::int64_t rows,
                                          std::int64_t hidden) {
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* in = x + row * hidden;
  float sum = 0.0f;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
#pragma unroll
    for (int k = 0; k < Width; ++k) sum += to_float(v.value[k]);
  }
  const float mean = warp_sum(sum) / static_cast<float>(hidden);
  float squares = 0.0f;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float centered = to_float(v.value[k]) - mean;
      squares += centered * centered;
    }
  }
  const float rstd = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(hidden) + epsilon);
  T* out = y + row * hidden;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
    const Vector<T, Width> gain = load_vector<T, Width>(weight + c);
    Vector<T, Width> result;
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      float value = (to_float(v.value[k]) - mean) * rstd * to_float(gain.value[k]);
      if (bias != nullptr) value += to_float(bias[c + k]);
      result.value[k] = from_float<T>(value);
    }
    store_vector(out + c, result);
  }
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

template <class T, int Width>
__global__ void layer_norm_backward_input_kernel(const T* dy, const T* x, const T* weight,
                                                 const float* mean_in, const float* rstd_in, T* dx,
                                                 std::int64_t rows, std::int64_t hidden) {
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(kRowsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* in = x + row * hidden;
  const T* grad_out = dy + row * hidden;
  const float mean = mean_in[row];
  const float rstd = rstd_in[row];
  float scaled_sum = 0.0f, projection_sum = 0.0f;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
    const Vector<T, Width> g = load_vector<T, Width>(grad_out + c);
    const Vector<T, Width> gain = load_vector<T, Width>(weight + c);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float scaled = to_float(g.value[k]) * to_float(gain.value[k]);
      scaled_sum += scaled;
      projection_sum += scaled * (to_float(v.value[k]) - mean) * rstd;
    }
  }
  const float scaled_mean = warp_sum(scaled_sum) / static_cast<float>(hidden);
  const float projection_mean = warp_sum(projection_sum) / static_cast<float>(hidden);
  T* grad_in = dx + row * hidden;
  for (std::int64_t c = lane * Width; c < hidden; c += 32 * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(in + c);
    const Vector<T, Width> g = load_vector<T, Width>(grad_out + c);
    const Vector<T, Width> gain = load_vector<T, Width>(weight + c);
    Vector<T, Width> result = load_vector<T, Width>(grad_in + c);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float normalized = (to_float(v.value[k]) - mean) * rstd;
      const float scaled = to_float(g.value[k]) * to_float(gain.value[k]);
      result.value[k] = from_float<T>(to_float(result.value[k]) +
                                      rstd * (scaled - scaled_mean - normalized * projection_mean));
    }
    store_vector(grad_in + c, result);
  }
}

// dweight term dy·x̂ and dbias term dy of one element.
template <class T>
struct LayerNormParameterTerms {
  const T* dy;
  const T* x;
  const float* mean;
  const float* rstd;
  std::int64_t hidden;
  __device__ float2 operator()(std::int64_t row, std::int64_t column) const {
    const std::int64_t i = row * hidden + column;
    const float gradient = to_float(dy[i]);
    return make_float2(gradient * (to_float(x[i]) - mean[row]) * rstd[row], gradient);
  }
};

}  // namespace

void launch_layer_norm_forward(const void* x, const void* weight, const void* bias, double epsilon,
                               void* y, float* mean, float* rstd, std::int64_t rows,
                               std::int64_t hidden, ScalarType type) {
  if (rows == 0) return;
  dispatch_cuda_type(type, "layer_norm_forward", [&]<class T>() {
    const auto launch = [&]<int Width>() {
      layer_norm_forward_kernel<T, Width>
          <<<ceil_div(rows, kRowsPerBlock), 32 * kRowsPerBlock, 0, current_stream()>>>(
              static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias),
              static_cast<float>(epsilon), static_cast<T*>(y), mean, rstd, rows, hidden);
    };
    if (rows_vectorizable<T>(hidden, {x, weight, y})) {
      launch.template operator()<kVectorWidth<T>>();
    } else {
      launch.template operator()<1>();
    }
    STRATA_CUDA_CHECK_LAUNCH();
  });
}

void launch_layer_norm_backward(const void* dy, const void* x, const void* weight,
                                const float* mean, const float* rstd, void* dx, float* dweight,
                                float* dbias, std::int64_t rows, std::int64_t hidden,
                                ScalarType type) {
  if (rows == 0) return;
  dispatch_cuda_type(type, "layer_norm_backward", [&]<class T>() {
    const auto launch = [&]<int Width>() {
      layer_norm_backward_input_kernel<T, Width>
          <<<ceil_div(rows, kRowsPerBlock), 32 * kRowsPerBlock, 0, current_stream()>>>(
              static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(weight),
              mean, rstd, static_cast<T*>(dx), rows, hidden);
    };
    if (rows_vectorizable<T>(hidden, {dy, x, weight, dx})) {
      launch.template operator()<kVectorWidth<T>>();
    } else {
      launch.template operator()<1>();
    }
    STRATA_CUDA_CHECK_LAUNCH();
    launch_column_sums(rows, hidden,
                       LayerNormParameterTerms<T>{static_cast<const T*>(dy),
                                                  static_cast<const T*>(x), mean, rstd, hidden},
                       dweight, dbias);
  });
}

}  // namespace strata::executor::cuda
