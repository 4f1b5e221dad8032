#include "strata/executor/ops/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor_testing.h"

namespace strata::executor {
namespace {

TEST(CrossEntropy, ForwardMatchesLogSoftmaxEvenForLargeLogits) {
  // Logits near 1000 overflow a naive exp; the log-sum-exp must not.
  Tensor logits = testing::random_tensor({3, 7}, ScalarType::float32, 1);
  for (std::int64_t i = 0; i < 7; ++i) logits.data<float>()[i] += 1000.0f;
  const Tensor targets = testing::int32_tensor({6, 0, 3});
  Tensor losses = Tensor::zeros({3}, ScalarType::float32);
  cross_entropy_forward(logits, targets, losses);
  for (std::int64_t n = 0; n < 3; ++n) {
    double largest = -1e300, total = 0;
    for (std::int64_t v = 0; v < 7; ++v)
      largest = std::max(largest, testing::element(logits, n * 7 + v));
    for (std::int64_t v = 0; v < 7; ++v)
      total += std::exp(testing::element(logits, n * 7 + v) - largest);
    const double expected = largest + std::log(total) -
                            testing::element(logits, n * 7 + targets.data<std::int32_t>()[n]);
    EXPECT_NEAR(testing::element(losses, n), expected, 1e-4);
    EXPECT_TRUE(std::isfinite(testing::element(losses, n)));
  }
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferencesOfTheScaledMean) {
  Tensor logits = testing::random_tensor({4, 6}, ScalarType::float64, 1, 2.0);
  const Tensor targets = testing::int32_tensor({1, 5, 0, 5});
  Tensor losses = Tensor::zeros({4}, ScalarType::float64);
  Tensor dlogits = Tensor::zeros(logits.shape(), ScalarType::float64);
  cross_entropy_backward(logits, targets, 0.25, dlogits);
  testing::expect_gradient_matches(
      logits, dlogits,
      [&] {
        cross_entropy_forward(logits, targets, losses);
        double mean = 0;
        for (std::int64_t n = 0; n < 4; ++n) mean += 0.25 * losses.data<double>()[n];
        return mean;
      },
      "dlogits");
}

TEST(CrossEntropy, TargetOutsideTheVocabularyIsRefused) {
  const Tensor logits = testing::random_tensor({1, 6}, ScalarType::float32, 1);
  Tensor losses = Tensor::zeros({1}, ScalarType::float32);
  EXPECT_THROW(cross_entropy_forward(logits, testing::int32_tensor({6}), losses), InvariantError);
}

}  // namespace
}  // namespace strata::executor
