#include "strata/executor/ops/reduction.h"

#include "../cuda/reductions.cuh"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

double sum_of(const Tensor& values) {
  if (on_cuda("sum_of", {&values})) {
    double sum = 0;
    if constexpr (kCudaBackendBuilt) {
      Tensor result = Tensor::zeros({1}, ScalarType::float64, Device::cuda);
      cuda::launch_sum(values.data<float>(), values.numel(), false, result.data<double>());
      sum = result.to(Device::cpu).data<double>()[0];
    }
    return sum;
  }
  check_cpu_same_type("sum_of", {&values});
  return dispatch_floating(values.scalar_type(), "sum_of", [&]<class T>() {
    double sum = 0;
    const T* data = values.data<T>();
    for (std::int64_t i = 0; i < values.numel(); ++i) sum += data[i];
    return sum;
  });
}

}  // namespace strata::executor
