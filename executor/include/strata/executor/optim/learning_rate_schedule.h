// Learning-rate schedule: linear warm-up, then cosine decay to a floor (GPT-3, llm.c). Used by the
// training loop; stored in checkpoints through its inputs.
#pragma once

#include <cstdint>

namespace strata::executor {

struct LearningRateSchedule {
  double peak = 3e-4;
  double minimum = 3e-5;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;

  // Rate for optimizer step `step` (0-based): peak·(step+1)/warmup during warm-up, then
  // minimum + ½(peak − minimum)(1 + cos(π·progress)) with progress from 0 to 1 at total_steps.
  double at(std::int64_t step) const;
};

}  // namespace strata::executor
