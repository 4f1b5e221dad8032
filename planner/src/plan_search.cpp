#include "strata/planner/plan_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "candidate.h"
#include "candidate_evaluator.h"
#include "strata/costmodels/activation_memory.h"
#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/mesh_placement.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/costmodels/plan_costs.h"
#include "strata/planner/layer_split.h"
#include "strata/planner/mesh_orders.h"
#include "strata/schedule/micro_batches_in_flight.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/mesh_ranks.h"
#include "thread_shares.h"

namespace strata::planner {
namespace {

using schemas::MeshAxis;
using schemas::RecomputeGranularity;
using schemas::ScheduleType;
using search::Deficit;
using search::Evaluator;
using search::Knobs;
using search::Scored;
using search::Verdict;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

double peak_memory_bytes(const RankedPlan& ranked) {
  double peak = 0;
  for (const simulator::RankMemory& memory : ranked.memory)
    peak = std::max(peak, memory.peak_bytes);
  return peak;
}

std::string describe_bottleneck(const schemas::Plan& plan, const simulator::StepMetrics& metrics) {
  const simulator::TimeBreakdown& time = metrics.breakdown;
  const double step = metrics.step_time_s;
  const auto crosses = [&](std::vector<MeshAxis> axes) {
    const costmodels::GroupSpan span = costmodels::group_span(
        plan.cluster, costmodels::first_group_ranks(plan.mesh, std::move(axes)));
    return span.outermost_tier() > 0 ? " crosses nodes" : "";
  };
  struct Part {
    double seconds;
    std::string words;
  };
  const std::vector<Part> parts{
      {time.bubble_s, "pipeline bubble"},
      {time.tp_comm_s,
       fmt::format("tp {}{}", plan.sequence_parallel ? "all-gather/reduce-scatter" : "all-reduce",
                   crosses({MeshAxis::tp}))},
      {time.cp_comm_s, fmt::format("cp ring exchange{}", crosses({MeshAxis::cp}))},
      {time.ep_comm_s, "expert all-to-all"},
      {time.host_issue_s, "the host issuing kernels"},
      {time.pp_comm_s, "pipeline sends"},
      {time.dp_comm_s,
       fmt::format("dp gradient reduction{}", crosses({MeshAxis::dp, MeshAxis::cp}))},
      {time.recompute_s, "recomputation"},
      {time.optimizer_s, "optimizer step"}};
  const Part* largest = &parts[0];
  for (const Part& part : parts) {
    if (part.seconds > largest->seconds) largest = &part;
  }
  if (largest->seconds < 0.03 * step) return "compute-bound";
  return fmt::format("{} {:.0f}%", largest->words, 100 * largest->seconds / step);
}

namespace {

// What every phase of a search reads.
struct SearchContext {
  const schemas::ModelConfig& model;
  const schemas::ClusterConfig& cluster;
  const SearchOptions& options;
  const std::vector<MeshOrder>& orders;
  double capacity = 0;
  unsigned threads = 1;
};

// Scoring every candidate: those that pass the rules and fit by the memory bounds, by (bound,
// index); the nearest of those that do not fit, for explaining a search that finds none.
struct Scores {
  std::vector<Scored> scored;
  std::vector<Deficit> deficits;
  // The executor's refusal of the first candidate it refused (by index: whatever the threads).
  std::optional<schemas::ExecutorRefusal> refusal;
};

Scores score_candidates(const SearchContext& context, const std::vector<Knobs>& candidates,
                        SearchStatistics& stats) {
  // Each share scores an interleaved part of the candidates into its own lists; merging sorts
  // by (bound, index), so the result does not depend on the number of threads.
  struct Share {
    std::vector<Scored> scored;
    std::vector<Deficit> deficits;
    std::int64_t rules = 0, executor = 0, duplicates = 0, model_states = 0, activations = 0;
    std::optional<schemas::ExecutorRefusal> refusal;  // of this share's first refused candidate
    std::size_t refusal_index = 0;
  };
  std::vector<Share> shares(context.threads);
  std::atomic<std::size_t> done{0};
  const SearchOptions& options = context.options;
  const auto score = [&](unsigned thread) {
    Evaluator evaluator(context.model, context.cluster, options, context.orders, context.capacity);
    Share& share = shares[thread];
    for (std::size_t i = thread; i < candidates.size(); i += context.threads) {
      double peak = 0;
      const Verdict verdict = evaluator.build(candidates[i], &peak);
      if (verdict == Verdict::ok) {
        const costmodels::PlanCosts costs =
            costmodels::plan_costs(evaluator.plan(), &evaluator.current_layer_costs(),
                                   costmodels::CostDetail::step_bound, &evaluator.placement());
        share.scored.push_back({evaluator.lower_bound(costs), i});
      } else if (options.exhaustive &&
                 (verdict == Verdict::model_states || verdict == Verdict::activations)) {
        share.scored.push_back({0.0, i});  // simulated anyway: the test of the pruning
      } else if (verdict == Verdict::rules) {
        ++share.rules;
      } else if (verdict == Verdict::executor) {
        ++share.executor;
        if (!share.refusal) {
          share.refusal = evaluator.refusal();
          share.refusal_index = i;
        }
      } else if (verdict == Verdict::duplicate) {
        ++share.duplicates;
      } else {
        (verdict == Verdict::model_states ? share.model_states : share.activations)++;
        share.deficits.push_back({peak, i, verdict});
        // Keep only the nearest few.
        if (share.deficits.size() > 64) {
          std::nth_element(share.deficits.begin(), share.deficits.begin() + 16,
                           share.deficits.end(), [](const Deficit& a, const Deficit& b) {
                             return std::tie(a.peak_bytes, a.index) <
                                    std::tie(b.peak_bytes, b.index);
                           });
          share.deficits.resize(16);
        }
      }
      done.fetch_add(1, std::memory_order_relaxed);
    }
  };
  run_thread_shares(context.threads, score,
                    options.progress ? std::function<void()>([&] {
                      options.progress(done.load(), candidates.size());
                    })
                                     : std::function<void()>());
  Scores scores;
  std::size_t first_refused = candidates.size();
  for (Share& share : shares) {
    scores.scored.insert(scores.scored.end(), share.scored.begin(), share.scored.end());
    scores.deficits.insert(scores.deficits.end(), share.deficits.begin(), share.deficits.end());
    stats.pruned_by_rules += share.rules;
    stats.pruned_by_executor += share.executor;
    if (share.refusal && share.refusal_index < first_refused) {
      first_refused = share.refusal_index;
      scores.refusal = std::move(share.refusal);
    }
    stats.pruned_as_duplicates += share.duplicates;
    stats.pruned_by_model_states += share.model_states;
    stats.pruned_by_activations += share.activations;
  }
  stats.estimated = static_cast<std::int64_t>(scores.scored.size());
  std::sort(scores.scored.begin(), scores.scored.end(), [](const Scored& a, const Scored& b) {
    return std::tie(a.lower_bound_s, a.index) < std::tie(b.lower_bound_s, b.index);
  });
  return scores;
}

bool equivalent(double a, double b) {
  return std::fabs(a - b) <= kEquivalentTolerance * std::max(std::fabs(a), std::fabs(b));
}

// Which of two equivalent plans shows their answer: fewer parallel axes, then no context
// parallelism, then the default mesh order (lower is simpler).
std::tuple<int, bool, bool> complexity(const schemas::Plan& plan) {
  const schemas::Mesh& mesh = plan.mesh;
  const int axes = (mesh.tp > 1) + (mesh.cp > 1) + (mesh.pp > 1) + (mesh.dp > 1) + (mesh.ep > 1) +
                   (mesh.etp > 1);
  return {axes, mesh.cp > 1, mesh.order != schemas::Mesh{}.order};
}

// The mesh a row of the ranking stands for: its parallel sizes. Its variants — other pipeline
// interleavings, micro-batches, ZeRO stages, recomputation, schedules and mesh orders on the same
// sizes — are one answer to a user choosing a layout, counted on the row.
using MeshSizes = std::array<std::int64_t, 6>;
MeshSizes mesh_sizes(const schemas::Mesh& mesh) {
  return {mesh.tp, mesh.cp, mesh.pp, mesh.dp, mesh.ep, mesh.etp};
}
MeshSizes mesh_sizes(const Knobs& knobs) {
  return {knobs.tp, knobs.cp, knobs.pp, knobs.dp, knobs.ep, knobs.etp};
}

// Adds a simulated plan to the ranking: as its own row, or (unless every variant is its own row)
// in place of its mesh's row when it is faster — or as fast, with the same peak memory, and
// simpler. Rows keep the order their first plan arrived in: the (bound, index) order.
void keep_answer(RankedPlan ranked, bool all_variants, std::vector<RankedPlan>& kept) {
  if (!all_variants) {
    for (RankedPlan& row : kept) {
      if (mesh_sizes(row.plan.mesh) != mesh_sizes(ranked.plan.mesh)) continue;
      const bool tie = equivalent(row.metrics.step_time_s, ranked.metrics.step_time_s);
      const bool faster = !tie && ranked.metrics.step_time_s < row.metrics.step_time_s;
      const bool simpler = tie && equivalent(peak_memory_bytes(row), peak_memory_bytes(ranked)) &&
                           complexity(ranked.plan) < complexity(row.plan);
      if (faster || simpler) row = std::move(ranked);
      return;
    }
  }
  kept.push_back(std::move(ranked));
}

// Branch and bound: simulates the scored candidates in order of their bound, a batch at a time
// across the threads, until the next bound cannot beat the K-th best simulated step. Returns the
// best K; candidates that overflow memory in simulation go to `over_memory`.
std::vector<RankedPlan> simulate_best(const SearchContext& context,
                                      const std::vector<Knobs>& candidates,
                                      const std::vector<Scored>& scored, SearchStatistics& stats,
                                      std::vector<NearMiss>& over_memory) {
  const SearchOptions& options = context.options;
  std::vector<RankedPlan> kept;
  // How many layouts of each mesh fit by the bounds: a row's variants are the others.
  std::map<MeshSizes, std::int64_t> layouts_of_mesh;
  if (!options.all_variants) {
    for (const Scored& candidate : scored)
      ++layouts_of_mesh[mesh_sizes(candidates[candidate.index])];
  }
  // A fixed batch size (not the thread count) keeps even the statistics independent of threads.
  const std::size_t batch = 8;
  for (std::size_t next = 0; next < scored.size();) {
    // Distinct answers simulate the candidates whose bound ties the K-th as well: any of them may
    // be a variant of it (and the simplest one), so the K-th answer is complete.
    if (!options.exhaustive && kept.size() >= options.top_k) {
      const double kth_s = kept[options.top_k - 1].metrics.step_time_s;
      if (options.all_variants ? scored[next].lower_bound_s >= kth_s
                               : scored[next].lower_bound_s > kth_s * (1 + kEquivalentTolerance)) {
        break;
      }
    }
    const std::size_t end = std::min(scored.size(), next + batch);
    std::vector<std::optional<RankedPlan>> simulated(end - next);
    std::vector<std::optional<NearMiss>> misses(end - next);
    run_thread_shares(context.threads, [&](unsigned thread) {
      Evaluator evaluator(context.model, context.cluster, options, context.orders,
                          context.capacity);
      for (std::size_t i = next + thread; i < end; i += context.threads) {
        double peak = 0;
        if (evaluator.build(candidates[scored[i].index], &peak) != Verdict::ok) {
          evaluator.use_even_split();  // exhaustive mode: a candidate the pruning dropped
        }
        schemas::Plan plan = evaluator.plan();
        schemas::validate_plan(plan, schemas::JsonLocation("planner"));
        const simulator::PlanSimulation simulation = simulator::simulate_plan(plan, {});
        double peak_bytes = 0;
        for (const simulator::RankMemory& memory : simulation.result.memory) {
          peak_bytes = std::max(peak_bytes, memory.peak_bytes);
        }
        if (peak_bytes > context.capacity) {
          misses[i - next] = NearMiss{std::move(plan), peak_bytes, context.capacity, "activations"};
          continue;
        }
        plan.predicted = schemas::PredictedMetrics{simulation.metrics.step_time_s,
                                                   simulation.metrics.tokens_per_s,
                                                   simulation.metrics.mfu,
                                                   {},
                                                   std::string("strata plan")};
        for (const simulator::RankMemory& memory : simulation.result.memory) {
          plan.predicted->peak_memory_bytes_per_pipeline_rank.push_back(
              static_cast<std::int64_t>(std::ceil(memory.peak_bytes)));
        }
        RankedPlan ranked{std::move(plan), simulation.metrics, simulation.result.memory, "",
                          scored[i].lower_bound_s};
        ranked.bottleneck = describe_bottleneck(ranked.plan, ranked.metrics);
        simulated[i - next] = std::move(ranked);
      }
    });
    for (std::size_t i = 0; i < simulated.size(); ++i) {
      ++stats.simulated;
      if (simulated[i]) keep_answer(std::move(*simulated[i]), options.all_variants, kept);
      if (misses[i]) {
        ++stats.over_memory_in_simulation;
        over_memory.push_back(std::move(*misses[i]));
      }
    }
    // Stable: equal times keep the bound order, which is deterministic.
    std::stable_sort(kept.begin(), kept.end(), [](const RankedPlan& a, const RankedPlan& b) {
      return a.metrics.step_time_s < b.metrics.step_time_s;
    });
    if (kept.size() > options.top_k) kept.resize(options.top_k);
    next = end;
  }
  if (!options.all_variants) {
    for (RankedPlan& row : kept) row.variants = layouts_of_mesh[mesh_sizes(row.plan.mesh)] - 1;
  }
  return kept;
}

// When no plan fits: the nearest candidates (those that overflowed in simulation, then the
// smallest deficits, each mesh once where model states bind) and the constraint that binds.
void explain_no_fit(const SearchContext& context, const std::vector<Knobs>& candidates,
                    std::vector<Deficit> deficits, std::vector<NearMiss> over_memory,
                    SearchResult& result) {
  const schemas::ModelConfig& model = context.model;
  const schemas::ClusterConfig& cluster = context.cluster;
  const SearchOptions& options = context.options;
  const double capacity = context.capacity;
  const SearchStatistics& stats = result.statistics;
  std::sort(deficits.begin(), deficits.end(), [](const Deficit& a, const Deficit& b) {
    return std::tie(a.peak_bytes, a.index) < std::tie(b.peak_bytes, b.index);
  });
  Evaluator evaluator(model, cluster, options, context.orders, capacity);
  for (NearMiss& miss : over_memory) result.nearest.push_back(std::move(miss));
  std::vector<std::tuple<std::int32_t, std::int32_t, std::int32_t, std::int32_t, std::int8_t,
                         std::int32_t, std::int32_t, std::int32_t>>
      shown_states;
  for (const Deficit& deficit : deficits) {
    if (result.nearest.size() >= 5) break;
    const Knobs& knobs = candidates[deficit.index];
    if (deficit.verdict == Verdict::model_states) {
      // Micro-batch, recomputation and schedule do not change model states: show each mesh once.
      const auto key = std::make_tuple(knobs.tp, knobs.cp, knobs.pp, knobs.dp, knobs.zero,
                                       knobs.dp_shard, knobs.ep, knobs.etp);
      if (std::find(shown_states.begin(), shown_states.end(), key) != shown_states.end()) continue;
      shown_states.push_back(key);
    }
    double peak = 0;
    evaluator.build(candidates[deficit.index], &peak);
    schemas::Plan plan = evaluator.plan();
    if (plan.stages.empty()) {
      plan.stages = schemas::even_pipeline_stages(model.num_layers, plan.mesh.pp * plan.mesh.vpp);
    }
    result.nearest.push_back(
        NearMiss{std::move(plan), deficit.peak_bytes, capacity,
                 deficit.verdict == Verdict::model_states ? "model states" : "activations"});
  }
  std::stable_sort(
      result.nearest.begin(), result.nearest.end(),
      [](const NearMiss& a, const NearMiss& b) { return a.peak_bytes < b.peak_bytes; });
  if (result.nearest.size() > 5) result.nearest.resize(5);
  const bool states_bind = stats.pruned_by_activations == 0 && stats.estimated == 0 &&
                           stats.over_memory_in_simulation == 0;
  if (candidates.empty()) {
    result.binding_constraint =
        "no layout satisfies the divisibility rules (heads, ffn, kv heads, sequence, global "
        "batch against the cluster's GPU count)";
  } else {
    // The fewest GPUs of this kind whose memory holds the model states spread evenly over
    // them (ZeRO-3 over all): a floor, since activations and uneven stages need more.
    const costmodels::ParameterBreakdown counts = costmodels::count_parameters(model);
    const costmodels::ModelStateDtypes states = costmodels::model_state_dtypes(
        options.precision, options.gradient_dtype, options.framework);
    const double bytes =
        static_cast<double>(
            costmodels::adam_model_state_bytes(states.states, states.gradients).total()) *
        static_cast<double>(counts.total());
    const double gpus = std::ceil(bytes / capacity);
    const double nodes = std::ceil(gpus / static_cast<double>(cluster.gpus_per_node));
    const std::string floor =
        fmt::format("at least {:.0f} {} GPUs ({:.0f} node{} of {}) would hold them", gpus,
                    cluster.gpu.name, nodes, nodes == 1 ? "" : "s", cluster.gpus_per_node);
    if (states_bind) {
      result.binding_constraint = fmt::format(
          "memory for model states: weights, gradients and Adam state need {:.1f} GiB in all; "
          "the best sharding still leaves the fullest GPU above its {:.1f} GiB; {}",
          bytes / kGiB, capacity / kGiB, floor);
    } else {
      result.binding_constraint = fmt::format(
          "memory for activations: model states fit when sharded ({}), but no layout's "
          "activations fit the {:.1f} GiB per GPU (micro-batch 1 and full recomputation "
          "included)",
          floor, capacity / kGiB);
    }
  }
}

}  // namespace

SearchResult search_plans(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
                          const SearchOptions& given) {
  const auto started = std::chrono::steady_clock::now();
  SearchOptions options = given;
  if (options.seq_length <= 0) options.seq_length = model.max_seq_length;
  if (options.top_k == 0) options.top_k = 1;
  const std::vector<MeshOrder> orders = all_orders();
  const SearchContext context{
      model,
      cluster,
      options,
      orders,
      static_cast<double>(cluster.usable_memory_bytes()) -
          options.memory_reserve_fraction * static_cast<double>(cluster.gpu.memory_bytes),
      std::max(1u, options.threads > 0 ? options.threads : std::thread::hardware_concurrency())};

  SearchResult result;
  SearchStatistics& stats = result.statistics;
  const std::vector<Knobs> candidates =
      search::enumerate(model, cluster, options, orders, &stats.pruned_by_rules);
  stats.enumerated = static_cast<std::int64_t>(candidates.size()) + stats.pruned_by_rules;
  Scores scores = score_candidates(context, candidates, stats);
  std::vector<NearMiss> over_memory;
  result.best = simulate_best(context, candidates, scores.scored, stats, over_memory);
  result.executor_refusal = std::move(scores.refusal);
  result.executor_refuses_all = result.best.empty() && result.executor_refusal &&
                                stats.estimated == 0 &&
                                stats.pruned_by_model_states + stats.pruned_by_activations == 0;
  if (result.executor_refuses_all) {
    result.binding_constraint = fmt::format(
        "strata's executor does not run these plans ({}: {}); --framework names another stack "
        "to plan for, for simulation only",
        result.executor_refusal->json_path, result.executor_refusal->rule);
  } else if (result.best.empty()) {
    explain_no_fit(context, candidates, std::move(scores.deficits), std::move(over_memory), result);
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace strata::planner
