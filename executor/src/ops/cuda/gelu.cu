#include "../../cuda/device_math.cuh"
#include "gelu.cuh"

namespace strata::executor::cuda {
namespace {

constexpr float kTanhScale = 0.7978845608028654f;  // √(2/π)
constexpr float kCubicCoefficient = 0.044715f;

template <class T>
struct GeluForward {
  const T* x;
  T* y;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> in = load_vector<T, Width>(x + i);
    Vector<T, Width> out;
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float v = to_float(in.value[k]);
      const float t = tanhf(kTanhScale * (v + kCubicCoefficient * v * v * v));
      out.value[k] = from_float<T>(0.5f * v * (1.0f + t));
    }
    store_vector(y + i, out);
  }
};

template <class T>
struct GeluBackward {
  const T* dy;
  const T* x;
  T* dx;
  bool accumulate;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> in = load_vector<T, Width>(x + i);
    const Vector<T, Width> gradient = load_vector<T, Width>(dy + i);
    Vector<T, Width> out;
    if (accumulate) {
      out = load_vector<T, Width>(dx + i);
    } else {
#pragma unroll
      for (int k = 0; k < Width; ++k) out.value[k] = from_float<T>(0.0f);
    }
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float v = to_float(in.value[k]);
      const float t = tanhf(kTanhScale * (v + kCubicCoefficient * v * v * v));
      const float dt = (1.0f - t * t) * kTanhScale * (1.0f + 3.0f * kCubicCoefficient * v * v);
      const float derivative = 0.5f * (1.0f + t) + 0.5f * v * dt;
      out.value[k] =
          from_float<T>(to_float(out.value[k]) + to_float(gradient.value[k]) * derivative);
    }
    store_vector(dx + i, out);
  }
};

}  // namespace

void launch_gelu_forward(const void* x, void* y, std::int64_t n, ScalarType type) {
  dispatch_cuda_type(type, "gelu_forward", [&]<class T>() {
    launch_vector_loop<T>(n, aligned_16(x) && aligned_16(y),
                          GeluForward<T>{static_cast<const T*>(x), static_cast<T*>(y)});
  });
}

void launch_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n, ScalarType type,
                          bool accumulate) {
  dispatch_cuda_type(type, "gelu_backward", [&]<class T>() {
    launch_vector_loop<T>(n, aligned_16(dy) && aligned_16(x) && aligned_16(dx),
                          GeluBackward<T>{static_cast<const T*>(dy), static_cast<const T*>(x),
                                          static_cast<T*>(dx), accumulate});
  });
}

}  // namespace strata::executor::cuda
