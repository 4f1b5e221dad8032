// Mixture-of-experts plans that several cost-model tests compute by hand.
#pragma once

#include <cstdint>
#include <string>

#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::testing {

// Qwen3-30B-A3B (h 2048, 32 query heads and 4 kv heads of 128, 128 experts of width 768, top 8)
// on `gpus` H100s, 4,096-token sequences one per micro-batch, ZeRO 1, Megatron-LM.
inline schemas::Plan qwen3_moe_plan(std::int64_t gpus, std::int64_t tp, std::int64_t ep,
                                    std::int64_t etp = 1) {
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = tp;
  knobs.mesh.dp = gpus / tp;
  knobs.mesh.ep = ep;
  knobs.mesh.etp = etp;
  knobs.seq_length = 4096;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = gpus / tp;
  knobs.sequence_parallel = tp > 1;
  knobs.zero_stage = 1;
  knobs.framework = schemas::TrainingFramework::megatron_lm;
  const std::int64_t nodes = (gpus + 7) / 8;
  return schemas::build_plan(schemas::model_preset("qwen3-30b-a3b"),
                             schemas::cluster_preset("dgx-h100:" + std::to_string(nodes)), knobs,
                             "test");
}

// DeepSeek-V3 on one DGX H100 (8 GPUs: tp · dp · pp of them), tp 2 with sequence parallelism (64
// heads a rank), 4,096-token sequences one per micro-batch, `global_batch_size` of them a step,
// Megatron-LM.
inline schemas::Plan deepseek_v3_tp2_plan(std::int64_t dp = 4, std::int64_t pp = 1,
                                          std::int64_t ep = 8, std::int64_t global_batch_size = 4) {
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = 2;
  knobs.mesh.dp = dp;
  knobs.mesh.pp = pp;
  knobs.mesh.ep = ep;
  knobs.seq_length = 4096;
  knobs.global_batch_size = global_batch_size;
  knobs.sequence_parallel = true;
  knobs.framework = schemas::TrainingFramework::megatron_lm;
  return schemas::build_plan(schemas::model_preset("deepseek-v3"),
                             schemas::cluster_preset("dgx-h100:1"), knobs, "test");
}

}  // namespace strata::testing
