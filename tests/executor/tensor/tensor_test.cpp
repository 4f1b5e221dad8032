// Tensors across types and devices on a machine without a GPU: bfloat16 rounding (the GPU's
// round-to-nearest-even, worked out by hand below), conversions between float types, and a CUDA
// tensor refused with the reason when there is no GPU to hold it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/ops/convert.h"
#include "strata/executor/ops/reduction.h"
#include "strata/executor/tensor/bfloat16.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

TEST(Bfloat16, RoundsToNearestWithTiesToEven) {
  // bfloat16 keeps 7 mantissa bits: near 1 its spacing is 2^-7.
  EXPECT_EQ(float_to_bfloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + 0x1p-9f)), 1.0f);  // below half
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + 0x1p-8f)), 1.0f);  // tie → even
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + 3 * 0x1p-8f)),
            1.0f + 0x1p-6f);  // tie → even
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(-2.5f)), -2.5f);  // exactly representable
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(INFINITY)), INFINITY);
  // The largest finite float rounds up to infinity, as the GPU's conversion does.
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::max())), INFINITY);
}

TEST(Convert, RoundTripsThroughBfloat16WithinHalfAnUlp) {
  const Tensor values = testing::random_tensor({1000}, ScalarType::float64, 1, 30.0);
  Tensor narrow = Tensor::zeros(values.shape(), ScalarType::bfloat16);
  convert(values, narrow);
  Tensor back = Tensor::zeros(values.shape(), ScalarType::float32);
  convert(narrow, back);
  for (std::int64_t i = 0; i < values.numel(); ++i) {
    const double value = values.data<double>()[i];
    EXPECT_LE(std::abs(back.data<float>()[i] - value), std::abs(value) * 0x1p-8) << i;
  }
}

TEST(Reduction, SumsInFloat64) {
  Tensor values = Tensor::zeros({3}, ScalarType::float32);
  values.data<float>()[0] = 1e8f;
  values.data<float>()[1] = 1.0f;
  values.data<float>()[2] = -1e8f;
  EXPECT_EQ(sum_of(values), 1.0);  // float32 accumulation would lose the 1
}

TEST(Tensor, CudaTensorsAreRefusedWithTheReasonWithoutAGpu) {
  std::string why_not;
  if (cuda_device_info(&why_not)) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(Tensor::zeros({4}, ScalarType::float32, Device::cuda), DeviceError);
  EXPECT_FALSE(why_not.empty());
}

}  // namespace
}  // namespace strata::executor
