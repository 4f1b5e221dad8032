// Helpers for the CUDA backend's tests (ggml's test-backend-ops is the model): a fixture that
// skips with the reason where no GPU can be used, random inputs rounded to the type under test so
// that the CPU reference sees exactly the GPU's inputs, and the normalised error ‖a − b‖/‖b‖ with
// a tolerance per dtype.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/ops/convert.h"
#include "strata/executor/tensor/tensor.h"
#include "tensor_testing.h"

namespace strata::executor::testing {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_not;
    if (!cuda_device_info(&why_not)) GTEST_SKIP() << "no CUDA device: " << why_not;
  }
};

// The dtypes the CUDA backend computes in, for parameterised tests.
inline const ScalarType kCudaTypes[] = {ScalarType::float32, ScalarType::bfloat16};

inline std::string type_label(const ::testing::TestParamInfo<ScalarType>& info) {
  return scalar_type_name(info.param);
}

// float64 values representable in `type` (rounded through it), for a CPU reference.
inline Tensor rounded_to(const Tensor& values, ScalarType type) {
  Tensor narrow = Tensor::zeros(values.shape(), type);
  convert(values, narrow);
  Tensor wide = Tensor::zeros(values.shape(), ScalarType::float64);
  convert(narrow, wide);
  return wide;
}

// Random float64 values already rounded to `type`.
inline Tensor random_in(const Shape& shape, ScalarType type, std::uint32_t seed,
                        double scale = 1.0) {
  return rounded_to(random_tensor(shape, ScalarType::float64, seed, scale), type);
}

// A host tensor (any floating type) as `type` on the GPU.
inline Tensor on_gpu(const Tensor& host, ScalarType type) {
  Tensor narrow = Tensor::zeros(host.shape(), type);
  convert(host, narrow);
  return narrow.to(Device::cuda);
}

// A GPU tensor back on the host as float64.
inline Tensor from_gpu(const Tensor& device) {
  const Tensor host = device.to(Device::cpu);
  Tensor wide = Tensor::zeros(host.shape(), ScalarType::float64);
  convert(host, wide);
  return wide;
}

inline double normalized_error(const Tensor& got, const Tensor& reference) {
  double difference = 0, norm = 0;
  for (std::int64_t i = 0; i < reference.numel(); ++i) {
    const double want = element(reference, i);
    const double delta = element(got, i) - want;
    if (std::isnan(delta)) return INFINITY;
    difference += delta * delta;
    norm += want * want;
  }
  return std::sqrt(difference) / std::max(std::sqrt(norm), 1e-30);
}

// What an op's output may differ from the float64 reference by: float32 arithmetic with float32
// accumulation lands near 1e-6; bfloat16 outputs carry their own rounding (2⁻⁹ relative) and
// bf16 intermediates (attention's probabilities), so 1e-2.
inline double tolerance_for(ScalarType type) { return type == ScalarType::bfloat16 ? 1e-2 : 1e-5; }

}  // namespace strata::executor::testing

#define EXPECT_CLOSE_TO_REFERENCE(got_gpu, reference, type)                     \
  do {                                                                          \
    const double strata_error_ = ::strata::executor::testing::normalized_error( \
        ::strata::executor::testing::from_gpu(got_gpu), reference);             \
    EXPECT_LE(strata_error_, ::strata::executor::testing::tolerance_for(type))  \
        << #got_gpu << " in " << ::strata::executor::scalar_type_name(type);    \
  } while (false)
