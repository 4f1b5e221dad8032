// Plan rules written once, as predicates: each returns a plan's first refusal of the rule — the
// JSON path below the plan and the rule, the two halves of an InputError — or nullopt where the
// plan keeps it. validate_plan (and the plan-set reader) throw what they return; the planner asks
// the same functions before it sets a field, and the trainer before it switches layout, so that
// what the planner emits and the trainer accepts is what validation allows.
#pragma once

#include <optional>
#include <string>

#include "strata/schemas/json_location.h"
#include "strata/schemas/plan.h"

namespace strata::schemas {

struct PlanRefusal {
  std::string json_path;  // below the plan document, e.g. "/ep_comm_overlap"
  std::string rule;
};

// Throws `refusal` as an InputError at its path below `plan_location` (the plan document's, or
// any object holding a "mesh" and "batch" as a plan does).
[[noreturn]] void fail_at(const JsonLocation& plan_location, const PlanRefusal& refusal);

// Why a mesh does not fit the model (at /mesh/tp, /mesh/ep, /mesh/etp or /mesh/pp): tp must
// divide the attention heads and the MLPs and divide or be a multiple of the kv heads, the expert
// mesh divide the experts and fold over each stage's ranks, and the pipeline stay within the
// layers and Strata's stage limit. A checkpoint's recorded layout meets the same rule.
std::optional<PlanRefusal> mesh_model_refusal(const Mesh& mesh, const ModelConfig& model);

// Why context parallelism cannot split `seq_length` (at /mesh/cp): causal cp cuts each sequence
// into 2·cp chunks, an early and a late one per rank, as Megatron-LM does.
std::optional<PlanRefusal> context_parallel_refusal(const Mesh& mesh, std::int64_t seq_length);

// Why a batch does not hold for the model and the mesh's dp (at /batch/...): limits, a
// micro-batch within the global batch, a sequence within the model's context, a global batch
// that micro_batch_size × dp divides, and num_micro_batches the quotient.
std::optional<PlanRefusal> batch_refusal(const BatchConfig& batch, const Mesh& mesh,
                                         const ModelConfig& model);

// Why sequence parallelism must be off or on (at /sequence_parallel): it needs tp > 1 and a
// sequence share (seq_length / cp) that tp divides; a mixture of experts with tp needs it, so that
// each tp rank routes its own tokens.
std::optional<PlanRefusal> sequence_parallel_refusal(const Mesh& mesh, const ModelConfig& model,
                                                     std::int64_t seq_length,
                                                     bool sequence_parallel);

// Why a schedule does not fit the mesh and batch (at /schedule/type, /mesh/vpp or
// /batch/num_micro_batches): interleaving needs vpp > 1 and runs micro-batches in groups of pp;
// model chunks need interleaving (or a custom schedule).
std::optional<PlanRefusal> schedule_refusal(ScheduleType schedule, const Mesh& mesh,
                                            const BatchConfig& batch);

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
