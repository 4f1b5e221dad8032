// Learning-rate schedule: linear warm-up, then cosine decay to a floor (GPT-3, llm.c), linear
// decay to it (Megatron's --lr-decay-style linear), or a constant rate. Used by the training loop;
// stored in checkpoints through its inputs.
#pragma once

#include <array>
#include <cstdint>

#include "strata/schemas/enum_names.h"

namespace strata::executor {

enum class LearningRateDecay { cosine, linear, constant };
inline constexpr std::array<schemas::EnumName<LearningRateDecay>, 3> kLearningRateDecayNames{
    {{LearningRateDecay::cosine, "cosine"},
     {LearningRateDecay::linear, "linear"},
     {LearningRateDecay::constant, "constant"}}};

struct LearningRateSchedule {
  double peak = 3e-4;
  double minimum = 3e-5;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  LearningRateDecay decay = LearningRateDecay::cosine;

  // Rate for optimizer step `step` (0-based): peak·(step+1)/warmup during warm-up, then, with
  // progress from 0 to 1 at total_steps, minimum + ½(peak − minimum)(1 + cos(π·progress))
  // (cosine), minimum + (peak − minimum)(1 − progress) (linear), or peak (constant).
  double at(std::int64_t step) const;
};

}  // namespace strata::executor
