#include "strata/executor/optim/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace strata::executor {

double LearningRateSchedule::at(std::int64_t step) const {
  if (step < warmup_steps) {
    return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (decay == LearningRateDecay::constant) return peak;
  const std::int64_t decay_steps = std::max<std::int64_t>(1, total_steps - warmup_steps);
  const double progress = std::clamp(
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  if (decay == LearningRateDecay::linear) return minimum + (peak - minimum) * (1.0 - progress);
  return minimum + 0.5 * (peak - minimum) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace strata::executor
