// `strata plan`'s search: every layout of a model on a cluster (tp, cp, pp, dp, vpp, micro-batch,
// ZeRO stage, recomputation, sequence parallelism, schedule, rank order onto the network tiers,
// pipeline layer split) — for the strata framework only those its executor admits
// (schemas/executor_admission.h, the rule `strata train` applies) — pruned by memory before any
// timing, ranked by a lower bound on the step time, and the most promising simulated in full until
// no remaining bound can beat the K-th best.
//
// Because the bound never exceeds what the simulator predicts (layer_split.h and src/candidate_evaluator.cpp
// say why), stopping when the next bound passes the K-th best simulated time returns exactly the
// top K that simulating every candidate would — the estimate cannot reorder what simulation keeps.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/schemas/executor_admission.h"
#include "strata/schemas/plan.h"
#include "strata/simulator/plan_simulation.h"

namespace strata::planner {

struct SearchOptions {
  std::int64_t global_batch_size = 0;  // sequences per step; fixed whatever the layout
  std::int64_t seq_length = 0;         // 0: the model's max_seq_length
  std::size_t top_k = 5;
  double memory_reserve_fraction = 0;  // of GPU memory, kept free beyond the cluster's reserve
  std::int64_t max_tp = 0;             // 0: twice the GPUs of a node
  std::vector<schemas::ScheduleType> schedules{
      schemas::ScheduleType::one_f_one_b, schemas::ScheduleType::interleaved_one_f_one_b,
      schemas::ScheduleType::zb_h1, schemas::ScheduleType::gpipe};
  schemas::Dtype precision = schemas::Dtype::bf16;
  // What gradients are accumulated and reduced in (the plans' gradient_dtype); absent: the
  // precision's default.
  std::optional<schemas::Dtype> gradient_dtype;
  // The stack the plans are for (costmodels/framework_behaviour.h): its behaviours change the
  // predictions.
  schemas::TrainingFramework framework = schemas::TrainingFramework::strata;
  unsigned threads = 0;  // 0: every core
  // Tests only: no memory pruning and no bound, every candidate simulated — the reference the
  // pruning and the branch and bound are checked against.
  bool exhaustive = false;
  // Rank every simulated plan on its own. By default each row is a distinct mesh (tp, cp, pp, dp,
  // ep, etp): the fastest of its layouts — vpp, micro-batch, ZeRO, recomputation, schedule, mesh
  // order — and, among layouts as fast with the same peak memory, the simplest. The top K are
  // then K meshes, each counting its other layouts (RankedPlan::variants).
  bool all_variants = false;
  // Called from the calling thread now and then with (candidates done, candidates in all).
  std::function<void(std::size_t, std::size_t)> progress;
};

struct RankedPlan {
  schemas::Plan plan;  // complete, with `predicted` filled in
  simulator::StepMetrics metrics;
  std::vector<simulator::RankMemory> memory;
  std::string bottleneck;  // in words, e.g. "pipeline bubble 11%"
  double lower_bound_s = 0;
  // The other layouts of this plan's mesh that fit by the search's memory bounds
  // (SearchOptions::all_variants off): this plan is the fastest of those simulated, and the
  // simplest of equally fast ones — fewest parallel axes, then no cp, then the default order.
  std::int64_t variants = 0;
};

// The fullest rank's predicted peak memory of a ranked plan.
double peak_memory_bytes(const RankedPlan& ranked);

// Relative difference within which two plans' step times and peak memories are the same answer.
inline constexpr double kEquivalentTolerance = 1e-9;

// A layout that does not fit, with how much memory its fullest GPU lacks.
struct NearMiss {
  schemas::Plan plan;
  double peak_bytes = 0;
  double capacity_bytes = 0;
  std::string reason;
};

struct SearchStatistics {
  std::int64_t enumerated = 0;
  std::int64_t pruned_by_rules = 0;         // divisibility, batch, interleaving, sequence rules
  std::int64_t pruned_by_executor = 0;      // strata framework: what its executor refuses
  std::int64_t pruned_as_duplicates = 0;    // full recompute that needs no recomputed layer
  std::int64_t pruned_by_model_states = 0;  // weights + gradients + optimizer alone exceed memory
  std::int64_t pruned_by_activations = 0;   // no layer split fits with activations
  std::int64_t estimated = 0;               // lower bound computed
  std::int64_t simulated = 0;
  std::int64_t over_memory_in_simulation = 0;
  double seconds = 0;
};

struct SearchResult {
  std::vector<RankedPlan> best;    // fastest first
  std::vector<NearMiss> nearest;   // when nothing fits: the closest candidates
  std::string binding_constraint;  // when nothing fits: what binds, in words
  // For the strata framework, why its executor refused candidates (schemas/executor_admission.h):
  // they are never ranked. Absent when it refused none.
  std::optional<schemas::ExecutorRefusal> executor_refusal;
  // Nothing ranked because the executor refuses every candidate (binding_constraint says why), not
  // because none fits.
  bool executor_refuses_all = false;
  SearchStatistics statistics;
};

SearchResult search_plans(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
                          const SearchOptions& options);

// The limiting part of a simulated plan, in words.
std::string describe_bottleneck(const schemas::Plan& plan, const simulator::StepMetrics& metrics);

}  // namespace strata::planner
