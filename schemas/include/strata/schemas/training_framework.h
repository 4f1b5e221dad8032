// TrainingFramework: which training stack runs a plan, for the behaviours that differ between
// stacks and that no other plan field expresses (what each stack does differently is the cost
// models' knowledge: costmodels/framework_behaviour.h). Strata's own executor is the default; a
// plan naming another stack is one the simulator predicts as that stack runs it (validate-sim reads
// a published row's software.framework into it; `strata plan --framework` searches for it).
#pragma once

#include <array>

#include "strata/schemas/enum_names.h"

namespace strata::schemas {

enum class TrainingFramework {
  strata,
  megatron_lm,
  nemo,
  megatron_deepspeed,
  deepspeed,
  torchtitan,
  llm_foundry,
  // A plain PyTorch training loop over eager nn.Module layers, as nanoGPT writes them:
  // torch.autocast over fp32 parameters, one kernel per op, F.scaled_dot_product_attention,
  // torch.optim's AdamW.
  pytorch
};
inline constexpr std::array<EnumName<TrainingFramework>, 8> kTrainingFrameworkNames{
    {{TrainingFramework::strata, "strata"},
     {TrainingFramework::megatron_lm, "megatron-lm"},
     {TrainingFramework::nemo, "nemo"},
     {TrainingFramework::megatron_deepspeed, "megatron-deepspeed"},
     {TrainingFramework::deepspeed, "deepspeed"},
     {TrainingFramework::torchtitan, "torchtitan"},
     {TrainingFramework::llm_foundry, "llm-foundry"},
     {TrainingFramework::pytorch, "pytorch"}}};

// Whether the stack can run a mixture of experts' dispatch and combine all-to-alls beside another
// micro-batch's compute (a plan's ep_comm_overlap): Megatron-Core's combined 1F1B
// (--overlap-moe-expert-parallel-comm, Megatron-LM and NeMo/Megatron-Bridge, since Core 0.14),
// which pairs the forward of one micro-batch with the backward of another — with pipelining, only
// under the interleaved schedule. A capability the plan format checks, not a cost behaviour.
constexpr bool overlaps_expert_dispatch(TrainingFramework framework) {
  return framework == TrainingFramework::megatron_lm || framework == TrainingFramework::nemo;
}

}  // namespace strata::schemas
