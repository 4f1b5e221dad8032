#include "../../cuda/device_math.cuh"
#include "swiglu.cuh"

namespace strata::executor::cuda {
namespace {

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

template <class T>
struct SwigluForward {
  const T* gate;
  const T* up;
  T* y;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> g = load_vector<T, Width>(gate + i);
    const Vector<T, Width> u = load_vector<T, Width>(up + i);
    Vector<T, Width> out;
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float gv = to_float(g.value[k]);
      out.value[k] = from_float<T>(gv * sigmoid(gv) * to_float(u.value[k]));
    }
    store_vector(y + i, out);
  }
};

template <class T>
struct SwigluBackward {
  const T* dy;
  const T* gate;
  const T* up;
  T* dgate;
  T* dup;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> gradient = load_vector<T, Width>(dy + i);
    const Vector<T, Width> g = load_vector<T, Width>(gate + i);
    const Vector<T, Width> u = load_vector<T, Width>(up + i);
    Vector<T, Width> d_gate = load_vector<T, Width>(dgate + i);
    Vector<T, Width> d_up = load_vector<T, Width>(dup + i);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float gv = to_float(g.value[k]);
      const float s = sigmoid(gv);
      const float grad = to_float(gradient.value[k]);
      d_gate.value[k] = from_float<T>(to_float(d_gate.value[k]) +
                                      grad * to_float(u.value[k]) * s * (1.0f + gv * (1.0f - s)));
      d_up.value[k] = from_float<T>(to_float(d_up.value[k]) + grad * gv * s);
    }
    store_vector(dgate + i, d_gate);
    store_vector(dup + i, d_up);
  }
};

}  // namespace

void launch_swiglu_forward(const void* gate, const void* up, void* y, std::int64_t n,
                           ScalarType type) {
  dispatch_cuda_type(type, "swiglu_forward", [&]<class T>() {
    launch_vector_loop<T>(n, aligned_16(gate) && aligned_16(up) && aligned_16(y),
                          SwigluForward<T>{static_cast<const T*>(gate), static_cast<const T*>(up),
                                           static_cast<T*>(y)});
  });
}

void launch_swiglu_backward(const void* dy, const void* gate, const void* up, void* dgate,
                            void* dup, std::int64_t n, ScalarType type) {
  dispatch_cuda_type(type, "swiglu_backward", [&]<class T>() {
    launch_vector_loop<T>(
        n,
        aligned_16(dy) && aligned_16(gate) && aligned_16(up) && aligned_16(dgate) &&
            aligned_16(dup),
        SwigluBackward<T>{static_cast<const T*>(dy), static_cast<const T*>(gate),
                          static_cast<const T*>(up), static_cast<T*>(dgate), static_cast<T*>(dup)});
  });
}

}  // namespace strata::executor::cuda
