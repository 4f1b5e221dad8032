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
  Tensor lse = Tensor::zeros({3}, ScalarType::float32);
  cross_entropy_forward(logits, targets, losses, lse);
  for (std::int64_t n = 0; n < 3; ++n) {
    double largest = -1e300, total = 0;
    for (std::int64_t v = 0; v < 7; ++v)
      largest = std::max(largest, testing::element(logits, n * 7 + v));
    for (std::int64_t v = 0; v < 7; ++v)
      total += std::exp(testing::element(logits, n * 7 + v) - largest);
    const double expected_lse = largest + std::log(total);
    EXPECT_NEAR(testing::element(lse, n), expected_lse, 1e-3);
    EXPECT_NEAR(testing::element(losses, n),
                expected_lse - testing::element(logits, n * 7 + targets.data<std::int32_t>()[n]),
                1e-4);
    EXPECT_TRUE(std::isfinite(testing::element(losses, n)));
  }
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferencesOfTheScaledMean) {
  Tensor logits = testing::random_tensor({4, 6}, ScalarType::float64, 1, 2.0);
  const Tensor targets = testing::int32_tensor({1, 5, 0, 5});
  Tensor losses = Tensor::zeros({4}, ScalarType::float64);
  Tensor lse = Tensor::zeros({4}, ScalarType::float64);
  Tensor dlogits = Tensor::zeros(logits.shape(), ScalarType::float64);
  cross_entropy_forward(logits, targets, losses, lse);
  cross_entropy_backward(logits, targets, lse, 0.25, dlogits);
  testing::expect_gradient_matches(
      logits, dlogits,
      [&] {
        cross_entropy_forward(logits, targets, losses, lse);
        double mean = 0;
        for (std::int64_t n = 0; n < 4; ++n) mean += 0.25 * losses.data<double>()[n];
        return mean;
      },
      "dlogits");
}

TEST(CrossEntropy, BackwardMayOverwriteTheLogitsInPlace) {
  const Tensor logits = testing::random_tensor({3, 5}, ScalarType::float64, 2);
  const Tensor targets = testing::int32_tensor({4, 0, 2});
  Tensor losses = Tensor::zeros({3}, ScalarType::float64);
  Tensor lse = Tensor::zeros({3}, ScalarType::float64);
  cross_entropy_forward(logits, targets, losses, lse);
  Tensor separate = Tensor::zeros_like(logits);
  cross_entropy_backward(logits, targets, lse, 0.5, separate);
  Tensor in_place = Tensor::zeros_like(logits);
  in_place.copy_from(logits);
  cross_entropy_backward(in_place, targets, lse, 0.5, in_place);
  EXPECT_EQ(testing::max_relative_difference(in_place, separate), 0.0);
}

// Two vocabulary shards, their statistics combined as a vocab-parallel loss combines them across
// ranks, give the whole vocabulary's loss; each shard's backward is the matching slice.
TEST(CrossEntropy, ShardsCombineToTheWholeVocabulary) {
  constexpr std::int64_t kRows = 3, kVocab = 8, kSplit = 5;
  const Tensor logits = testing::random_tensor({kRows, kVocab}, ScalarType::float64, 3, 3.0);
  const Tensor targets = testing::int32_tensor({1, 6, 4});
  Tensor losses = Tensor::zeros({kRows}, ScalarType::float64);
  Tensor lse = Tensor::zeros({kRows}, ScalarType::float64);
  cross_entropy_forward(logits, targets, losses, lse);
  Tensor whole_gradient = Tensor::zeros_like(logits);
  cross_entropy_backward(logits, targets, lse, 1.0, whole_gradient);

  Tensor shards[2] = {Tensor::zeros({kRows, kSplit}, ScalarType::float64),
                      Tensor::zeros({kRows, kVocab - kSplit}, ScalarType::float64)};
  for (std::int64_t n = 0; n < kRows; ++n) {
    for (std::int64_t v = 0; v < kVocab; ++v) {
      Tensor& shard = shards[v < kSplit ? 0 : 1];
      const std::int64_t column = v < kSplit ? v : v - kSplit;
      shard.data<double>()[n * shard.size(1) + column] = logits.data<double>()[n * kVocab + v];
    }
  }
  const std::int64_t starts[2] = {0, kSplit};
  Tensor row_max[2], row_sum[2], target_logit[2];
  for (int s = 0; s < 2; ++s) {
    row_max[s] = Tensor::zeros({kRows}, ScalarType::float64);
    row_sum[s] = Tensor::zeros({kRows}, ScalarType::float64);
    target_logit[s] = Tensor::zeros({kRows}, ScalarType::float64);
    cross_entropy_shard_statistics(shards[s], targets, starts[s], row_max[s], row_sum[s],
                                   target_logit[s]);
  }
  Tensor combined_lse = Tensor::zeros({kRows}, ScalarType::float64);
  for (std::int64_t n = 0; n < kRows; ++n) {
    const double largest = std::max(row_max[0].data<double>()[n], row_max[1].data<double>()[n]);
    double total = 0, target = 0;
    for (int s = 0; s < 2; ++s) {
      total += row_sum[s].data<double>()[n] * std::exp(row_max[s].data<double>()[n] - largest);
      target += target_logit[s].data<double>()[n];
    }
    combined_lse.data<double>()[n] = largest + std::log(total);
    EXPECT_NEAR(combined_lse.data<double>()[n] - target, losses.data<double>()[n], 1e-12);
  }
  for (int s = 0; s < 2; ++s) {
    Tensor gradient = Tensor::zeros_like(shards[s]);
    cross_entropy_backward(shards[s], targets, combined_lse, 1.0, gradient, starts[s]);
    for (std::int64_t n = 0; n < kRows; ++n) {
      for (std::int64_t c = 0; c < shards[s].size(1); ++c) {
        EXPECT_NEAR(gradient.data<double>()[n * shards[s].size(1) + c],
                    whole_gradient.data<double>()[n * kVocab + starts[s] + c], 1e-12);
      }
    }
  }
}

TEST(CrossEntropy, TargetOutsideTheVocabularyIsRefused) {
  const Tensor logits = testing::random_tensor({1, 6}, ScalarType::float32, 1);
  Tensor losses = Tensor::zeros({1}, ScalarType::float32);
  Tensor lse = Tensor::zeros({1}, ScalarType::float32);
  EXPECT_THROW(cross_entropy_forward(logits, testing::int32_tensor({6}), losses, lse),
               InvariantError);
}

}  // namespace
}  // namespace strata::executor
