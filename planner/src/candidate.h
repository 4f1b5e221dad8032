// The planner's search, its internal pieces: a candidate layout as a small struct of knobs, what
// judging one can conclude, and the enumeration of every candidate of a search
// (candidate_enumeration.cpp). The evaluator that builds and bounds a candidate is
// candidate_evaluator.h; the search over them, plan_search.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "strata/planner/mesh_orders.h"
#include "strata/planner/plan_search.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_rules.h"

namespace strata::planner::search {

// One candidate, small enough to keep hundreds of thousands of them.
struct Knobs {
  std::int32_t tp = 1, cp = 1, pp = 1, dp = 1, vpp = 1, micro_batch = 1;
  std::int8_t zero = 0;
  std::int32_t dp_shard = 0;  // hybrid sharding's shard group in dp ranks; 0: all of dp
  schemas::RecomputeGranularity recompute = schemas::RecomputeGranularity::none;
  bool sequence_parallel = false;
  schemas::ScheduleType schedule = schemas::ScheduleType::one_f_one_b;
  std::int16_t order = 0;        // index into the search's distinct orders
  std::int32_t ep = 1, etp = 1;  // the expert mesh of a mixture of experts
};

// `executor`: the strata framework's executor would refuse the plan (schemas/executor_admission.h).
enum class Verdict { ok, rules, executor, duplicate, model_states, activations };

struct Scored {
  double lower_bound_s = 0;
  std::size_t index = 0;  // into the candidate list: ties break by it, so output is deterministic
};

struct Deficit {
  double peak_bytes = 0;
  std::size_t index = 0;
  Verdict verdict = Verdict::ok;
};

// The divisors of n, ascending.
std::vector<std::int64_t> divisors(std::int64_t n);

// Every candidate of a search: meshes that fill the cluster in each distinct order, hybrid shards,
// expert meshes, pipeline interleavings, micro-batches, ZeRO stages, recomputation and schedules.
// Candidates the plan rules refuse while enumerating are counted in `rule_pruned` and, where an
// observer is given, shown to it with the rule's refusal (their expert mesh 1 × 1): the rule
// validate_plan would throw first for that candidate.
using RefusalObserver = std::function<void(const Knobs&, const schemas::PlanRefusal&)>;
std::vector<Knobs> enumerate(const schemas::ModelConfig& model,
                             const schemas::ClusterConfig& cluster, const SearchOptions& options,
                             const std::vector<MeshOrder>& orders, std::int64_t* rule_pruned,
                             const RefusalObserver& on_refused = {});

}  // namespace strata::planner::search
