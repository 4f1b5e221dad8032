// CUDA (cuBLASLt) against the CPU for the linear layer: forward with and without bias, the
// fused bias+GELU epilogue, and the backward's input gradient and float32 weight and bias
// gradients accumulated onto what they held.
#include "strata/executor/ops/linear.h"

#include <gtest/gtest.h>

#include "cuda_testing.h"
#include "strata/executor/ops/gelu.h"

namespace strata::executor {
namespace {

using testing::on_gpu;
using testing::random_in;

class CudaLinear : public testing::CudaTest, public ::testing::WithParamInterface<ScalarType> {};

constexpr std::int64_t kRows = 67, kIn = 96, kOut = 40;

TEST_P(CudaLinear, ForwardWithAndWithoutBias) {
  const ScalarType type = GetParam();
  const Tensor x = random_in({kRows, kIn}, type, 1);
  const Tensor weight = random_in({kOut, kIn}, type, 2, 0.2);
  const Tensor bias = random_in({kOut}, type, 3);
  for (const Tensor* b : {&bias, static_cast<const Tensor*>(nullptr)}) {
    Tensor y = Tensor::zeros({kRows, kOut}, ScalarType::float64);
    linear_forward(x, weight, b, y);
    Tensor y_gpu = Tensor::zeros({kRows, kOut}, type, Device::cuda);
    const Tensor bias_gpu = on_gpu(bias, type);
    linear_forward(on_gpu(x, type), on_gpu(weight, type), b ? &bias_gpu : nullptr, y_gpu);
    EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);
  }
}

TEST_P(CudaLinear, FusedGeluEpilogueKeepsThePreActivation) {
  const ScalarType type = GetParam();
  const Tensor x = random_in({kRows, kIn}, type, 4);
  const Tensor weight = random_in({kOut, kIn}, type, 5, 0.2);
  const Tensor bias = random_in({kOut}, type, 6);
  Tensor pre = Tensor::zeros({kRows, kOut}, ScalarType::float64);
  Tensor y = Tensor::zeros({kRows, kOut}, ScalarType::float64);
  linear_gelu_forward(x, weight, &bias, pre, y);
  Tensor pre_gpu = Tensor::zeros({kRows, kOut}, type, Device::cuda);
  Tensor y_gpu = Tensor::zeros({kRows, kOut}, type, Device::cuda);
  const Tensor bias_gpu = on_gpu(bias, type);
  linear_gelu_forward(on_gpu(x, type), on_gpu(weight, type), &bias_gpu, pre_gpu, y_gpu);
  EXPECT_CLOSE_TO_REFERENCE(pre_gpu, pre, type);
  EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);
}

TEST_P(CudaLinear, BackwardAccumulatesFloat32ParameterGradients) {
  const ScalarType type = GetParam();
  const Tensor x = random_in({kRows, kIn}, type, 7);
  const Tensor weight = random_in({kOut, kIn}, type, 8, 0.2);
  const Tensor dy = random_in({kRows, kOut}, type, 9);
  Tensor dx = random_in({kRows, kIn}, type, 10);
  Tensor dweight = random_in({kOut, kIn}, ScalarType::float32, 11);
  Tensor dbias = random_in({kOut}, ScalarType::float32, 12);
  Tensor dx_gpu = on_gpu(dx, type);
  Tensor dweight_gpu = on_gpu(dweight, ScalarType::float32);
  Tensor dbias_gpu = on_gpu(dbias, ScalarType::float32);
  linear_backward(dy, x, weight, &dx, dweight, &dbias);
  linear_backward(on_gpu(dy, type), on_gpu(x, type), on_gpu(weight, type), &dx_gpu, dweight_gpu,
                  &dbias_gpu);
  EXPECT_CLOSE_TO_REFERENCE(dx_gpu, dx, type);
  // Float32 results from bfloat16 products: accumulated in float32, only the inputs are rounded.
  EXPECT_CLOSE_TO_REFERENCE(dweight_gpu, dweight, ScalarType::float32);
  EXPECT_CLOSE_TO_REFERENCE(dbias_gpu, dbias, ScalarType::float32);
}

// Overwrite mode (β = 0): the GPU buffer starts with other values; the CPU's starts at zero.
TEST_P(CudaLinear, InputGradientOverwriteIgnoresWhatTheBufferHeld) {
  const ScalarType type = GetParam();
  const Tensor weight = random_in({kOut, kIn}, type, 13, 0.2);
  const Tensor dy = random_in({kRows, kOut}, type, 14);
  Tensor dx = Tensor::zeros({kRows, kIn}, ScalarType::float64);
  linear_backward_input(dy, weight, dx);
  Tensor dx_gpu = on_gpu(random_in({kRows, kIn}, type, 15), type);
  linear_backward_input(on_gpu(dy, type), on_gpu(weight, type), dx_gpu, GradientWrite::overwrite);
  EXPECT_CLOSE_TO_REFERENCE(dx_gpu, dx, type);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLinear, ::testing::ValuesIn(testing::kCudaTypes),
                         testing::type_label);

}  // namespace
}  // namespace strata::executor
