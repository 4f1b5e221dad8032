// CUDA against the CPU for LayerNorm and RMSNorm, forward (output and statistics) and backward
// (input gradient and the float32 parameter gradients), at a width that takes 16-byte vectors
// and one that does not.
#include <gtest/gtest.h>

#include "cuda_testing.h"
#include "strata/executor/ops/layer_norm.h"
#include "strata/executor/ops/rms_norm.h"

namespace strata::executor {
namespace {

using testing::on_gpu;
using testing::random_in;

class CudaNormalization : public testing::CudaTest,
                          public ::testing::WithParamInterface<ScalarType> {};

constexpr std::int64_t kRows = 67;

TEST_P(CudaNormalization, LayerNormForwardAndBackward) {
  const ScalarType type = GetParam();
  for (const std::int64_t hidden : {96, 100}) {
    const Tensor x = random_in({kRows, hidden}, type, 1, 3.0);
    const Tensor weight = random_in({hidden}, type, 2), bias = random_in({hidden}, type, 3);
    Tensor y = Tensor::zeros({kRows, hidden}, ScalarType::float64);
    Tensor mean = Tensor::zeros({kRows}, ScalarType::float64);
    Tensor rstd = Tensor::zeros({kRows}, ScalarType::float64);
    layer_norm_forward(x, weight, &bias, 1e-5, y, mean, rstd);
    const Tensor x_gpu = on_gpu(x, type), weight_gpu = on_gpu(weight, type);
    const Tensor bias_gpu = on_gpu(bias, type);
    Tensor y_gpu = Tensor::zeros({kRows, hidden}, type, Device::cuda);
    Tensor mean_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
    Tensor rstd_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
    layer_norm_forward(x_gpu, weight_gpu, &bias_gpu, 1e-5, y_gpu, mean_gpu, rstd_gpu);
    EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);
    EXPECT_CLOSE_TO_REFERENCE(mean_gpu, mean, ScalarType::float32);
    EXPECT_CLOSE_TO_REFERENCE(rstd_gpu, rstd, ScalarType::float32);

    const Tensor dy = random_in({kRows, hidden}, type, 4);
    Tensor dx = random_in({kRows, hidden}, type, 5);
    Tensor dweight = random_in({hidden}, ScalarType::float32, 6);
    Tensor dbias = random_in({hidden}, ScalarType::float32, 7);
    Tensor dx_gpu = on_gpu(dx, type);
    Tensor dweight_gpu = on_gpu(dweight, ScalarType::float32);
    Tensor dbias_gpu = on_gpu(dbias, ScalarType::float32);
    layer_norm_backward(dy, x, weight, mean, rstd, dx, dweight, &dbias);
    layer_norm_backward(on_gpu(dy, type), x_gpu, weight_gpu, mean_gpu, rstd_gpu, dx_gpu,
                        dweight_gpu, &dbias_gpu);
    EXPECT_CLOSE_TO_REFERENCE(dx_gpu, dx, type);
    EXPECT_CLOSE_TO_REFERENCE(dweight_gpu, dweight, type);
    EXPECT_CLOSE_TO_REFERENCE(dbias_gpu, dbias, type);
  }
}

TEST_P(CudaNormalization, RmsNormForwardAndBackward) {
  const ScalarType type = GetParam();
  for (const std::int64_t hidden : {96, 100}) {
    const Tensor x = random_in({kRows, hidden}, type, 8, 3.0);
    const Tensor weight = random_in({hidden}, type, 9);
    Tensor y = Tensor::zeros({kRows, hidden}, ScalarType::float64);
    Tensor rstd = Tensor::zeros({kRows}, ScalarType::float64);
    rms_norm_forward(x, weight, 1e-5, y, rstd);
    const Tensor x_gpu = on_gpu(x, type), weight_gpu = on_gpu(weight, type);
    Tensor y_gpu = Tensor::zeros({kRows, hidden}, type, Device::cuda);
    Tensor rstd_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
    rms_norm_forward(x_gpu, weight_gpu, 1e-5, y_gpu, rstd_gpu);
    EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);
    EXPECT_CLOSE_TO_REFERENCE(rstd_gpu, rstd, ScalarType::float32);

    const Tensor dy = random_in({kRows, hidden}, type, 10);
    Tensor dx = random_in({kRows, hidden}, type, 11);
    Tensor dweight = random_in({hidden}, ScalarType::float32, 12);
    Tensor dx_gpu = on_gpu(dx, type), dweight_gpu = on_gpu(dweight, ScalarType::float32);
    rms_norm_backward(dy, x, weight, rstd, dx, dweight);
    rms_norm_backward(on_gpu(dy, type), x_gpu, weight_gpu, rstd_gpu, dx_gpu, dweight_gpu);
    EXPECT_CLOSE_TO_REFERENCE(dx_gpu, dx, type);
    EXPECT_CLOSE_TO_REFERENCE(dweight_gpu, dweight, type);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaNormalization, ::testing::ValuesIn(testing::kCudaTypes),
                         testing::type_label);

}  // namespace
}  // namespace strata::executor
