// Megatron-LM command-line flags for a plan, so a plan Strata chose runs on the framework
// people already use: model shape (with a mixture of experts' experts, router and dense-layer
// pattern, and latent attention), parallel sizes (with the expert mesh), batch, precision,
// recomputation, the distributed optimizer and uneven pipeline splits.
#pragma once

#include <string>

#include "strata/schemas/plan.h"

namespace strata::planner {

// One flag per line, ending with " \" except the last, ready to paste after pretrain_gpt.py.
// Hybrid sharding exports as --num-distributed-optimizer-instances (ZeRO-1/2); a hybrid-sharded
// ZeRO-3 plan, which Megatron-LM's FSDP2 path cannot run, is refused (schemas::InputError).
std::string megatron_arguments(const schemas::Plan& plan);

}  // namespace strata::planner
