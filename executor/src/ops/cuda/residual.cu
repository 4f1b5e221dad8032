#include "../../cuda/device_math.cuh"
#include "residual.cuh"

namespace strata::executor::cuda {
namespace {

template <class T>
struct AddForward {
  const T* a;
  const T* b;
  T* y;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> left = load_vector<T, Width>(a + i);
    const Vector<T, Width> right = load_vector<T, Width>(b + i);
    Vector<T, Width> out;
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      out.value[k] = from_float<T>(to_float(left.value[k]) + to_float(right.value[k]));
    }
    store_vector(y + i, out);
  }
};

template <class T>
struct AccumulateTwice {
  const T* dy;
  T* da;
  T* db;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> gradient = load_vector<T, Width>(dy + i);
    Vector<T, Width> first = load_vector<T, Width>(da + i);
    Vector<T, Width> second = load_vector<T, Width>(db + i);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float g = to_float(gradient.value[k]);
      first.value[k] = from_float<T>(to_float(first.value[k]) + g);
      second.value[k] = from_float<T>(to_float(second.value[k]) + g);
    }
    store_vector(da + i, first);
    store_vector(db + i, second);
  }
};

}  // namespace

void launch_residual_forward(const void* a, const void* b, void* y, std::int64_t n,
                             ScalarType type) {
  dispatch_cuda_type(type, "residual_forward", [&]<class T>() {
    launch_vector_loop<T>(
        n, aligned_16(a) && aligned_16(b) && aligned_16(y),
        AddForward<T>{static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y)});
  });
}

void launch_residual_backward(const void* dy, void* da, void* db, std::int64_t n, ScalarType type) {
  dispatch_cuda_type(type, "residual_backward", [&]<class T>() {
    launch_vector_loop<T>(
        n, aligned_16(dy) && aligned_16(da) && aligned_16(db),
        AccumulateTwice<T>{static_cast<const T*>(dy), static_cast<T*>(da), static_cast<T*>(db)});
  });
}

}  // namespace strata::executor::cuda
