#include "../../cuda/column_sums.cuh"
#include "../../cuda/device_math.cuh"
#include "bias.cuh"

namespace strata::executor::cuda {

void launch_bias_forward(void* y, const void* bias, std::int64_t rows, std::int64_t features,
                         ScalarType type) {
  dispatch_cuda_type(type, "bias_forward", [&]<class T>() {
    launch_vector_loop<T>(rows * features, rows_vectorizable<T>(features, {bias, y}),
                          AddFromSource<T, RepeatingIndex>{
                              static_cast<const T*>(bias), static_cast<T*>(y), {features}});
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
