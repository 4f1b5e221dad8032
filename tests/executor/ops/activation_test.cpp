// GELU, squared ReLU, SwiGLU, the residual add and dropout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "strata/executor/ops/clamped_swiglu.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/ops/gelu.h"
#include "strata/executor/ops/residual.h"
#include "strata/executor/ops/squared_relu.h"
#include "strata/executor/ops/swiglu.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::weighted_sum;

TEST(Gelu, ForwardIsTheTanhApproximationOfTheErfGelu) {
  const Tensor x = random_tensor({64}, ScalarType::float32, 1, 2.0);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float32);
  gelu_forward(x, y);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double v = testing::element(x, i);
    const double tanh_form =
        0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(testing::element(y, i), tanh_form, 1e-6 * (1 + std::abs(tanh_form)));
    // The approximation stays within 1e-3 of x·Φ(x) (Hendrycks & Gimpel 2016).
    EXPECT_NEAR(tanh_form, 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-3);
  }
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({40}, ScalarType::float64, 1, 2.0);
  const Tensor dy = random_tensor(x.shape(), ScalarType::float64, 2);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float64);
  Tensor dx = Tensor::zeros(x.shape(), ScalarType::float64);
  gelu_backward(dy, x, dx);
  expect_gradient_matches(
      x, dx,
      [&] {
        gelu_forward(x, y);
        return weighted_sum(y, dy);
      },
      "dx");
}

TEST(Gelu, BackwardOverwriteIgnoresWhatTheBufferHeld) {
  const Tensor x = random_tensor({40}, ScalarType::float32, 1, 2.0);
  const Tensor dy = random_tensor(x.shape(), ScalarType::float32, 2);
  Tensor accumulated = Tensor::zeros(x.shape(), ScalarType::float32);
  gelu_backward(dy, x, accumulated);
  Tensor overwritten = random_tensor(x.shape(), ScalarType::float32, 3);
  overwritten.data<float>()[11] = std::nanf("");
  gelu_backward(dy, x, overwritten, GradientWrite::overwrite);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_EQ(testing::element(overwritten, i), testing::element(accumulated, i)) << i;
  }
}

TEST(SquaredRelu, ForwardSquaresThePositivePartAndBackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({40}, ScalarType::float64, 1, 2.0);
  x.data<double>()[3] = -0.5;
  x.data<double>()[4] = 1.5;
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float64);
  squared_relu_forward(x, y);
  EXPECT_EQ(y.data<double>()[3], 0.0);
  EXPECT_EQ(y.data<double>()[4], 2.25);
  const Tensor dy = random_tensor(x.shape(), ScalarType::float64, 2);
  Tensor dx = random_tensor(x.shape(), ScalarType::float64, 3);
  dx.data<double>()[7] = std::nan("");  // overwritten, never read
  squared_relu_backward(dy, x, dx, GradientWrite::overwrite);
  expect_gradient_matches(
      x, dx,
      [&] {
        squared_relu_forward(x, y);
        return weighted_sum(y, dy);
      },
      "dx");
}

TEST(Swiglu, ForwardAndBackward) {
  Tensor gate = random_tensor({5, 4}, ScalarType::float64, 1, 2.0);
  Tensor up = random_tensor({5, 4}, ScalarType::float64, 2);
  Tensor y = Tensor::zeros(gate.shape(), ScalarType::float64);
  swiglu_forward(gate, up, y);
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    const double g = gate.data<double>()[i];
    EXPECT_NEAR(y.data<double>()[i], g / (1 + std::exp(-g)) * up.data<double>()[i], 1e-14);
  }
  const Tensor dy = random_tensor(y.shape(), ScalarType::float64, 3);
  Tensor dgate = Tensor::zeros(gate.shape(), ScalarType::float64);
  Tensor dup = Tensor::zeros(up.shape(), ScalarType::float64);
  swiglu_backward(dy, gate, up, dgate, dup);
  auto loss = [&] {
    swiglu_forward(gate, up, y);
    return weighted_sum(y, dy);
  };
  expect_gradient_matches(gate, dgate, loss, "dgate");
  expect_gradient_matches(up, dup, loss, "dup");
}

// GPT-OSS's unit with a limit of 1: inputs on both sides of each clamp (none within the finite
// difference's step of a bound), so the stopped gradients are checked too.
TEST(ClampedSwiglu, ForwardClampsBothInputsAndBackwardMatchesFiniteDifferences) {
  const std::vector<double> gate_values{-2.5, -0.4, 0.3, 0.9, 1.3, 4.0};
  const std::vector<double> up_values{-3.0, -0.7, 0.2, 1.6, 0.8, -1.2};
  Tensor gate = Tensor::zeros({6}, ScalarType::float64);
  Tensor up = Tensor::zeros({6}, ScalarType::float64);
  for (std::size_t i = 0; i < 6; ++i) {
    gate.data<double>()[i] = gate_values[i];
    up.data<double>()[i] = up_values[i];
  }
  const SwigluClamp clamp{.limit = 1.0, .alpha = 1.702};
  Tensor y = Tensor::zeros({6}, ScalarType::float64);
  clamped_swiglu_forward(gate, up, clamp, y);
  for (std::size_t i = 0; i < 6; ++i) {
    const double g = std::min(gate_values[i], 1.0);
    const double u = std::clamp(up_values[i], -1.0, 1.0);
    EXPECT_NEAR(y.data<double>()[i], (u + 1) * g / (1 + std::exp(-1.702 * g)), 1e-14) << i;
  }
  const Tensor dy = random_tensor({6}, ScalarType::float64, 3);
  Tensor dgate = Tensor::zeros({6}, ScalarType::float64);
  Tensor dup = Tensor::zeros({6}, ScalarType::float64);
  clamped_swiglu_backward(dy, gate, up, clamp, dgate, dup);
  EXPECT_EQ(dgate.data<double>()[4], 0.0) << "gate above the limit";
  EXPECT_EQ(dup.data<double>()[0], 0.0) << "up below −limit";
  auto loss = [&] {
    clamped_swiglu_forward(gate, up, clamp, y);
    return weighted_sum(y, dy);
  };
  expect_gradient_matches(gate, dgate, loss, "dgate");
  expect_gradient_matches(up, dup, loss, "dup");
}

TEST(Residual, BackwardSendsTheGradientToBothBranches) {
  Tensor a = random_tensor({7}, ScalarType::float64, 1);
  Tensor b = random_tensor({7}, ScalarType::float64, 2);
  const Tensor dy = random_tensor({7}, ScalarType::float64, 3);
  Tensor y = Tensor::zeros({7}, ScalarType::float64);
  Tensor da = Tensor::zeros({7}, ScalarType::float64);
  Tensor db = Tensor::zeros({7}, ScalarType::float64);
  residual_backward(dy, da, db);
  auto loss = [&] {
    residual_forward(a, b, y);
    return weighted_sum(y, dy);
  };
  expect_gradient_matches(a, da, loss, "da");
  expect_gradient_matches(b, db, loss, "db");
}

DropoutKey key_for(std::int64_t features) {
  return DropoutKey{.seed = 7,
                    .step = 3,
                    .site = 2,
                    .first_token = 0,
                    .first_feature = 0,
                    .total_features = features};
}

TEST(Dropout, KeepsAboutOneMinusPAndScalesTheKeptElements) {
  const Tensor x = random_tensor({200, 50}, ScalarType::float64, 1);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float64);
  constexpr double kProbability = 0.25;
  dropout_forward(x, kProbability, key_for(50), y);
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    if (y.data<double>()[i] != 0) {
      ++kept;
      EXPECT_NEAR(y.data<double>()[i], x.data<double>()[i] / (1 - kProbability), 1e-12);
    }
  }
  // 10,000 Bernoulli(0.75) draws: σ ≈ 43, so ±200 is more than 4σ.
  EXPECT_NEAR(static_cast<double>(kept), 7500.0, 200.0);
}

TEST(Dropout, BackwardUsesTheForwardMaskAndMatchesFiniteDifferences) {
  Tensor x = random_tensor({6, 5}, ScalarType::float64, 1);
  const Tensor dy = random_tensor(x.shape(), ScalarType::float64, 2);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float64);
  Tensor dx = Tensor::zeros(x.shape(), ScalarType::float64);
  dropout_backward(dy, 0.5, key_for(5), dx);
  expect_gradient_matches(
      x, dx,
      [&] {
        dropout_forward(x, 0.5, key_for(5), y);
        return weighted_sum(y, dy);
      },
      "dx");
}

TEST(Dropout, AShardOfRowsAndFeaturesDropsWhatTheWholeTensorDrops) {
  const Tensor x = random_tensor({8, 6}, ScalarType::float64, 1);
  Tensor whole = Tensor::zeros(x.shape(), ScalarType::float64);
  dropout_forward(x, 0.5, key_for(6), whole);
  // Rows 4..7 and features 2..4 of the same tensor, as a rank of part 2 would hold them.
  Tensor shard_in = Tensor::zeros({4, 3}, ScalarType::float64);
  for (std::int64_t r = 0; r < 4; ++r) {
    for (std::int64_t c = 0; c < 3; ++c) {
      shard_in.data<double>()[r * 3 + c] = x.data<double>()[(r + 4) * 6 + c + 2];
    }
  }
  DropoutKey shard_key = key_for(6);
  shard_key.first_token = 4;
  shard_key.first_feature = 2;
  Tensor shard_out = Tensor::zeros(shard_in.shape(), ScalarType::float64);
  dropout_forward(shard_in, 0.5, shard_key, shard_out);
  for (std::int64_t r = 0; r < 4; ++r) {
    for (std::int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(shard_out.data<double>()[r * 3 + c], whole.data<double>()[(r + 4) * 6 + c + 2]);
    }
  }
  // A different step draws a different mask.
  DropoutKey next_step = key_for(6);
  next_step.step = 4;
  Tensor other = Tensor::zeros(x.shape(), ScalarType::float64);
  dropout_forward(x, 0.5, next_step, other);
  EXPECT_GT(testing::max_relative_difference(other, whole), 0.0);
}

}  // namespace
}  // namespace strata::executor
