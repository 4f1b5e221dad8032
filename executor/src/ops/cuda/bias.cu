#include "../../cuda/column_sums.cuh"
#include "../../cuda/device_math.cuh"
#include "bias.cuh"

namespace strata::executor::cuda {
namespace {

template <class T>
struct AddBias {
  const T* bias;
  T* y;
  std::int64_t features;
  template <int Width>
  __device__ void operator()(std::int64_t i) const {
    const Vector<T, Width> added = load_vector<T, Width>(bias + i % features);
    Vector<T, Width> value = load_vector<T, Width>(y + i);
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      value.value[k] = from_float<T>(to_float(value.value[k]) + to_float(added.value[k]));
    }
    store_vector(y + i, value);
  }
};

}  // namespace

void launch_bias_forward(void* y, const void* bias, std::int64_t rows, std::int64_t features,
                         ScalarType type) {
  dispatch_cuda_type(type, "bias_forward", [&]<class T>() {
    launch_vector_loop<T>(rows * features, rows_vectorizable<T>(features, {bias, y}),
                          AddBias<T>{static_cast<const T*>(bias), static_cast<T*>(y), features});
  });
}

void launch_bias_backward(const void* dy, float* dbias, std::int64_t rows, std::int64_t features,
                          ScalarType type) {
  dispatch_cuda_type(type, "bias_backward", [&]<class T>() {
    launch_column_sums(rows, features, RowValues<T>{static_cast<const T*>(dy), features}, dbias,
                       nullptr);
  });
}

}  // namespace strata::executor::cuda
