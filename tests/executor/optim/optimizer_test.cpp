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
