// Plan rules written once, as predicates: each returns a plan's first refusal of the rule — the
// JSON path below the plan and the rule, the two halves of an InputError — or nullopt where the
// plan keeps it. validate_plan (and the plan-set reader) throw what they return; the planner asks
// the same functions before it sets a field, and the trainer before it switches layout, so that
// what the planner emits and the trainer accepts is what validation allows.
#pragma once

#include <optional>
#include <string>

#include "strata/schemas/plan.h"

namespace strata::schemas {

struct PlanRefusal {
  std::string json_path;  // below the plan document, e.g. "/ep_comm_overlap"
  std::string rule;
};

// Why a mesh's hybrid sharding (dp_shard) does not hold under ZeRO stage `zero_stage`: shard
// groups that do not tile dp, sharding at ZeRO-0, or replicas that do not divide the experts'
// data-parallel ranks (expert state is sharded into the same replicas).
std::optional<PlanRefusal> dp_shard_refusal(const Mesh& mesh, std::int64_t zero_stage);

// Why the plan's experts' all-to-alls may not run beside another micro-batch's compute
// (ep_comm_overlap, Megatron-Core's combined 1F1B), whether or not the plan asks for it: no
// token exchange (ep·etp = 1), a stack that does not overlap them, a pipeline without
// interleaving, or full recomputation.
std::optional<PlanRefusal> ep_comm_overlap_refusal(const Plan& plan);

// Why one run cannot switch from `from` (named `from_name` in the rule: `plan "tp2dp2"`, `the
// run`) to `to`: a switch moves a run's state between layouts, so it keeps the model, the
// precision and the ranks.
std::optional<PlanRefusal> switch_refusal(const Plan& from, const std::string& from_name,
                                          const Plan& to);

}  // namespace strata::schemas
