// GPT-3 175B with tp = 1..8 over one 8-GPU node, one micro-batch of 2048 tokens: the plan the
// per-layer cost and activation tests check against the papers' numbers.
#pragma once

#include <string>

#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::testing {

inline schemas::Plan gpt3_plan(std::int64_t tp, bool sequence_parallel,
                               schemas::Dtype precision = schemas::Dtype::fp16,
                               const std::string& cluster = "dgx-a100-80gb") {
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = tp;
  knobs.mesh.dp = 8 / tp;
  knobs.seq_length = 2048;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 8 / tp;
  knobs.sequence_parallel = sequence_parallel;
  knobs.precision = precision;
  return schemas::build_plan(schemas::model_preset("gpt3-175b"), schemas::cluster_preset(cluster),
                             knobs, "test");
}

}  // namespace strata::testing
