#include <gtest/gtest.h>

#include <cmath>

#include "strata/executor/ops/layer_norm.h"
#include "strata/executor/ops/rms_norm.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::weighted_sum;

constexpr std::int64_t kRows = 3;
constexpr std::int64_t kHidden = 6;
constexpr double kEpsilon = 1e-5;

TEST(LayerNorm, ForwardMatchesTwoPassFormulaInFloat64) {
  const Tensor x = random_tensor({kRows, kHidden}, ScalarType::float32, 1, 3.0);
  const Tensor weight = random_tensor({kHidden}, ScalarType::float32, 2);
  const Tensor bias = random_tensor({kHidden}, ScalarType::float32, 3);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float32);
  Tensor mean = Tensor::zeros({kRows}, ScalarType::float32);
  Tensor rstd = Tensor::zeros({kRows}, ScalarType::float32);
  layer_norm_forward(x, weight, &bias, kEpsilon, y, mean, rstd);
  for (std::int64_t n = 0; n < kRows; ++n) {
    double row_mean = 0, variance = 0;
    for (std::int64_t c = 0; c < kHidden; ++c) row_mean += testing::element(x, n * kHidden + c);
    row_mean /= kHidden;
    for (std::int64_t c = 0; c < kHidden; ++c) {
      variance += std::pow(testing::element(x, n * kHidden + c) - row_mean, 2);
    }
    variance /= kHidden;
    for (std::int64_t c = 0; c < kHidden; ++c) {
      const double expected = (testing::element(x, n * kHidden + c) - row_mean) /
                                  std::sqrt(variance + kEpsilon) * testing::element(weight, c) +
                              testing::element(bias, c);
      EXPECT_NEAR(testing::element(y, n * kHidden + c), expected, 1e-5 * (1 + std::abs(expected)));
    }
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({kRows, kHidden}, ScalarType::float64, 1);
  Tensor weight = random_tensor({kHidden}, ScalarType::float64, 2);
  Tensor bias = random_tensor({kHidden}, ScalarType::float64, 3);
  const Tensor dy = random_tensor(x.shape(), ScalarType::float64, 4);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float64);
  Tensor mean = Tensor::zeros({kRows}, ScalarType::float64);
  Tensor rstd = Tensor::zeros({kRows}, ScalarType::float64);
  auto loss = [&] {
    layer_norm_forward(x, weight, &bias, kEpsilon, y, mean, rstd);
    return weighted_sum(y, dy);
  };
  loss();
  Tensor dx = Tensor::zeros(x.shape(), ScalarType::float64);
  Tensor dweight = Tensor::zeros(weight.shape(), ScalarType::float64);
  Tensor dbias = Tensor::zeros(bias.shape(), ScalarType::float64);
  layer_norm_backward(dy, x, weight, mean, rstd, dx, dweight, &dbias);
  expect_gradient_matches(x, dx, loss, "dx");
  expect_gradient_matches(weight, dweight, loss, "dweight");
  expect_gradient_matches(bias, dbias, loss, "dbias");
}

TEST(RmsNorm, ForwardMatchesFormulaInFloat64) {
  const Tensor x = random_tensor({kRows, kHidden}, ScalarType::float32, 1, 3.0);
  const Tensor weight = random_tensor({kHidden}, ScalarType::float32, 2);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float32);
  Tensor rstd = Tensor::zeros({kRows}, ScalarType::float32);
  rms_norm_forward(x, weight, kEpsilon, y, rstd);
  for (std::int64_t n = 0; n < kRows; ++n) {
    double mean_square = 0;
    for (std::int64_t c = 0; c < kHidden; ++c) {
      mean_square += std::pow(testing::element(x, n * kHidden + c), 2) / kHidden;
    }
    for (std::int64_t c = 0; c < kHidden; ++c) {
      const double expected = testing::element(x, n * kHidden + c) /
                              std::sqrt(mean_square + kEpsilon) * testing::element(weight, c);
      EXPECT_NEAR(testing::element(y, n * kHidden + c), expected, 1e-5 * (1 + std::abs(expected)));
    }
  }
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({kRows, kHidden}, ScalarType::float64, 1);
  Tensor weight = random_tensor({kHidden}, ScalarType::float64, 2);
  const Tensor dy = random_tensor(x.shape(), ScalarType::float64, 4);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float64);
  Tensor rstd = Tensor::zeros({kRows}, ScalarType::float64);
  auto loss = [&] {
    rms_norm_forward(x, weight, kEpsilon, y, rstd);
    return weighted_sum(y, dy);
  };
  loss();
  Tensor dx = Tensor::zeros(x.shape(), ScalarType::float64);
  Tensor dweight = Tensor::zeros(weight.shape(), ScalarType::float64);
  rms_norm_backward(dy, x, weight, rstd, dx, dweight);
  expect_gradient_matches(x, dx, loss, "dx");
  expect_gradient_matches(weight, dweight, loss, "dweight");
}

}  // namespace
}  // namespace strata::executor
