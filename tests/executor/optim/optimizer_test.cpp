// AdamW, the learning-rate schedule and gradient clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "strata/executor/optim/adamw.h"
#include "strata/executor/optim/gradient_clipping.h"
#include "strata/executor/optim/learning_rate_schedule.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

TEST(AdamW, ThreeStepsMatchTheTextbookUpdateWrittenOut) {
  const AdamWConfig config{.beta1 = 0.9, .beta2 = 0.95, .epsilon = 1e-8, .weight_decay = 0.1};
  Tensor parameter = testing::random_tensor({5}, ScalarType::float64, 1);
  Tensor m = Tensor::zeros({5}, ScalarType::float64);
  Tensor v = Tensor::zeros({5}, ScalarType::float64);
  std::vector<double> p(parameter.data<double>(), parameter.data<double>() + 5);
  std::vector<double> m_ref(5, 0.0), v_ref(5, 0.0);
  const double lr = 1e-2;
  for (std::int64_t step = 1; step <= 3; ++step) {
    const Tensor gradient = testing::random_tensor({5}, ScalarType::float64, 10 + step);
    adamw_update(parameter, gradient, m, v, lr, config.weight_decay, step, config);
    for (std::size_t i = 0; i < 5; ++i) {
      const double g = gradient.data<double>()[i];
      p[i] -= lr * config.weight_decay * p[i];
      m_ref[i] = 0.9 * m_ref[i] + 0.1 * g;
      v_ref[i] = 0.95 * v_ref[i] + 0.05 * g * g;
      const double m_hat = m_ref[i] / (1 - std::pow(0.9, step));
      const double v_hat = v_ref[i] / (1 - std::pow(0.95, step));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + 1e-8);
    }
  }
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NEAR(parameter.data<double>()[i], p[i], 1e-12);
}

// Clipping's factor applied as AdamW reads the gradient gives the very numbers of scaling the
// gradient first (clip_grad_norm_'s order), over several of the update's blocks and a partial
// one, and leaves the gradient as it was.
TEST(AdamW, ClippingFactorAppliedOnReadMatchesScalingTheGradientFirst) {
  const std::int64_t n = 5000;
  const AdamWConfig config;
  const Tensor gradient = testing::random_tensor({n}, ScalarType::float32, 2);
  Tensor p_on_read = testing::random_tensor({n}, ScalarType::float32, 1);
  Tensor m_on_read = testing::random_tensor({n}, ScalarType::float32, 3, 0.1);
  Tensor v_on_read = testing::random_tensor({n}, ScalarType::float32, 4, 0.1);
  for (std::int64_t i = 0; i < n; ++i) v_on_read.data<float>()[i] *= v_on_read.data<float>()[i];
  Tensor p_first = p_on_read.to(Device::cpu), m_first = m_on_read.to(Device::cpu);
  Tensor v_first = v_on_read.to(Device::cpu);
  Tensor scaled = gradient.to(Device::cpu);
  std::vector<Tensor> scaled_list{scaled};
  const double norm = global_gradient_norm(scaled_list);
  const double scale = clipping_scale(norm, norm / 3);
  ASSERT_LT(scale, 0.34);
  clip_gradients(scaled_list, norm / 3);
  adamw_update(p_first, scaled, m_first, v_first, 3e-3, 0.1, 7, config);
  adamw_update(p_on_read, gradient, m_on_read, v_on_read, 3e-3, 0.1, 7, config, scale);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(p_on_read.data<float>()[i], p_first.data<float>()[i]) << i;
    ASSERT_EQ(m_on_read.data<float>()[i], m_first.data<float>()[i]) << i;
    ASSERT_EQ(v_on_read.data<float>()[i], v_first.data<float>()[i]) << i;
  }
  const Tensor as_given = testing::random_tensor({n}, ScalarType::float32, 2);
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(gradient.data<float>()[i], as_given.data<float>()[i]) << i;
  }
  EXPECT_DOUBLE_EQ(clipping_scale(norm, 0), 1.0);
  EXPECT_DOUBLE_EQ(clipping_scale(norm, 2 * norm), 1.0);
}

TEST(LearningRateSchedule, WarmsUpLinearlyThenFollowsTheCosineToTheFloor) {
  const LearningRateSchedule schedule{
      .peak = 1.0, .minimum = 0.1, .warmup_steps = 10, .total_steps = 110};
  EXPECT_DOUBLE_EQ(schedule.at(0), 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(9), 1.0);
  EXPECT_DOUBLE_EQ(schedule.at(10), 1.0);
  EXPECT_NEAR(schedule.at(60), 0.55, 1e-12);  // halfway: the cosine's midpoint
  EXPECT_NEAR(schedule.at(35), 0.1 + 0.45 * (1 + std::cos(std::numbers::pi / 4)), 1e-12);
  EXPECT_DOUBLE_EQ(schedule.at(110), 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(500), 0.1);
}

TEST(LearningRateSchedule, LinearDecayAndConstantRateAfterTheSameWarmUp) {
  LearningRateSchedule schedule{.peak = 1.0,
                                .minimum = 0.1,
                                .warmup_steps = 10,
                                .total_steps = 110,
                                .decay = LearningRateDecay::linear};
  EXPECT_DOUBLE_EQ(schedule.at(0), 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(10), 1.0);
  EXPECT_NEAR(schedule.at(35), 0.1 + 0.9 * 0.75, 1e-12);  // a quarter of the way down
  EXPECT_NEAR(schedule.at(60), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(schedule.at(110), 0.1);
  schedule.decay = LearningRateDecay::constant;
  EXPECT_DOUBLE_EQ(schedule.at(4), 0.5);  // warm-up still applies
  EXPECT_DOUBLE_EQ(schedule.at(60), 1.0);
  EXPECT_DOUBLE_EQ(schedule.at(500), 1.0);
}

TEST(GradientClipping, ScalesToTheMaximumNormOnlyWhenAbove) {
  std::vector<Tensor> gradients{Tensor::zeros({2}, ScalarType::float32),
                                Tensor::zeros({1}, ScalarType::float32)};
  gradients[0].data<float>()[0] = 3;
  gradients[0].data<float>()[1] = 0;
  gradients[1].data<float>()[0] = 4;
  EXPECT_DOUBLE_EQ(global_gradient_norm(gradients), 5.0);
  EXPECT_DOUBLE_EQ(clip_gradients(gradients, 10.0), 5.0);
  EXPECT_FLOAT_EQ(gradients[1].data<float>()[0], 4.0f);
  EXPECT_DOUBLE_EQ(clip_gradients(gradients, 1.0), 5.0);
  EXPECT_NEAR(global_gradient_norm(gradients), 1.0, 1e-6);
  EXPECT_NEAR(gradients[0].data<float>()[0], 0.6, 1e-6);
}

}  // namespace
}  // namespace strata::executor
