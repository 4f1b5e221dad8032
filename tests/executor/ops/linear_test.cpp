#include "strata/executor/ops/linear.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor_testing.h"

namespace strata::executor {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::weighted_sum;

TEST(Linear, ForwardMatchesLoopsInFloat64) {
  const Tensor x = random_tensor({2, 3, 5}, ScalarType::float32, 1);
  const Tensor weight = random_tensor({4, 5}, ScalarType::float32, 2);
  const Tensor bias = random_tensor({4}, ScalarType::float32, 3);
  Tensor y = Tensor::zeros({2, 3, 4}, ScalarType::float32);
  linear_forward(x, weight, &bias, y);
  for (std::int64_t n = 0; n < 6; ++n) {
    for (std::int64_t o = 0; o < 4; ++o) {
      double expected = testing::element(bias, o);
      for (std::int64_t i = 0; i < 5; ++i) {
        expected += testing::element(x, n * 5 + i) * testing::element(weight, o * 5 + i);
      }
      EXPECT_NEAR(testing::element(y, n * 4 + o), expected, 1e-5 * (1 + std::abs(expected)));
    }
  }
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({3, 5}, ScalarType::float64, 1);
  Tensor weight = random_tensor({4, 5}, ScalarType::float64, 2);
  Tensor bias = random_tensor({4}, ScalarType::float64, 3);
  const Tensor dy = random_tensor({3, 4}, ScalarType::float64, 4);
  Tensor y = Tensor::zeros({3, 4}, ScalarType::float64);
  auto loss = [&] {
    linear_forward(x, weight, &bias, y);
    return weighted_sum(y, dy);
  };
  Tensor dx = Tensor::zeros(x.shape(), ScalarType::float64);
  Tensor dweight = Tensor::zeros(weight.shape(), ScalarType::float64);
  Tensor dbias = Tensor::zeros(bias.shape(), ScalarType::float64);
  linear_backward(dy, x, weight, &dx, dweight, &dbias);
  expect_gradient_matches(x, dx, loss, "dx");
  expect_gradient_matches(weight, dweight, loss, "dweight");
  expect_gradient_matches(bias, dbias, loss, "dbias");
}

TEST(Linear, BackwardAccumulatesIntoExistingGradients) {
  const Tensor x = random_tensor({3, 5}, ScalarType::float64, 1);
  const Tensor weight = random_tensor({4, 5}, ScalarType::float64, 2);
  const Tensor dy = random_tensor({3, 4}, ScalarType::float64, 4);
  Tensor once = Tensor::zeros(weight.shape(), ScalarType::float64);
  Tensor twice = Tensor::zeros(weight.shape(), ScalarType::float64);
  linear_backward(dy, x, weight, nullptr, once, nullptr);
  linear_backward(dy, x, weight, nullptr, twice, nullptr);
  linear_backward(dy, x, weight, nullptr, twice, nullptr);
  for (std::int64_t i = 0; i < once.numel(); ++i) {
    EXPECT_NEAR(twice.data<double>()[i], 2 * once.data<double>()[i], 1e-12);
  }
}

// Overwrite mode writes dy·weight over whatever dx held, never reading it: the same values as
// accumulating onto zeros, whatever garbage (NaN included) was there before.
TEST(Linear, InputGradientOverwriteIgnoresWhatTheBufferHeld) {
  const Tensor weight = random_tensor({4, 5}, ScalarType::float64, 2);
  const Tensor dy = random_tensor({3, 4}, ScalarType::float64, 4);
  Tensor accumulated = Tensor::zeros({3, 5}, ScalarType::float64);
  linear_backward_input(dy, weight, accumulated);
  Tensor overwritten = random_tensor({3, 5}, ScalarType::float64, 5);
  overwritten.data<double>()[7] = std::nan("");
  linear_backward_input(dy, weight, overwritten, GradientWrite::overwrite);
  for (std::int64_t i = 0; i < accumulated.numel(); ++i) {
    EXPECT_EQ(testing::element(overwritten, i), testing::element(accumulated, i)) << i;
  }
}

TEST(Linear, MismatchedShapesAreRefused) {
  const Tensor x = random_tensor({3, 5}, ScalarType::float32, 1);
  const Tensor weight = random_tensor({4, 6}, ScalarType::float32, 2);
  Tensor y = Tensor::zeros({3, 4}, ScalarType::float32);
  EXPECT_THROW(linear_forward(x, weight, nullptr, y), InvariantError);
  const Tensor weight64 = random_tensor({4, 5}, ScalarType::float64, 2);
  EXPECT_THROW(linear_forward(x, weight64, nullptr, y), InvariantError);
}

}  // namespace
}  // namespace strata::executor
