// A plan in, the numbers a training team reads out: the schedule is built, costed and simulated,
// and the result summarised as throughput, utilisation, a time breakdown and memory per stage.
//
// FLOP convention (README "FLOP counting"): model FLOPs are Megatron-LM's — every GEMM of the
// layers and the LM head, and attention's QKᵀ and AV over the full s×s score matrix, 3× the
// forward for forward + backward, no recomputation. MFU = model FLOPs per step / (step time ·
// GPUs · dense peak of the training dtype). Hardware FLOPs add what recomputation runs again.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "strata/costmodels/plan_costs.h"
#include "strata/schedule/pipeline_schedule.h"
#include "strata/simulator/simulation.h"

namespace strata::simulator {

struct StepMetrics {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;
  double mfu = 0;
  double hardware_tflops_per_gpu = 0;
  double bubble_fraction = 0;
  TimeBreakdown breakdown;  // mean over pipeline ranks; sums to the step time
};

struct PlanSimulation {
  schedule::PipelineSchedule schedule;  // of the step actually simulated (see below)
  costmodels::PlanCosts costs;
  SimulationResult result;
  StepMetrics metrics;
  // The plan's micro-batch count, or, for a step longer than exact_micro_batch_limit, the count of
  // the longer of the two steps the prediction was extrapolated from (its schedule and timeline).
  std::int64_t simulated_micro_batches = 0;
};

// Steps of up to this many micro-batches are simulated action by action: max(1,024, 16·pp·vpp)
// while that keeps a step within 8 × 512² stage passes, then fewer, down to 8·pp·vpp for the
// deepest pipeline a plan may have (schemas::kMaxPipelineStages). A generated schedule's
// step is linear in its micro-batch count once the pipeline is full (every extra micro-batch adds
// the same work to every stage; the warm-up, the drain, the gradient reduction and the optimizer
// stay the same), so a longer step is predicted from two shorter ones, m₁ and m₂ = 2m₁ past the
// warm-up: time, bubble and each stage's memory extend along the line through them. That bounds
// the work of a prediction whatever the global batch. Custom schedules are simulated as written.
std::int64_t exact_micro_batch_limit(const schemas::Plan& plan);

StepMetrics step_metrics(const schemas::Plan& plan, const costmodels::PlanCosts& costs,
                         const SimulationResult& result);

// `plan_directory` resolves a custom schedule's CSV file.
PlanSimulation simulate_plan(const schemas::Plan& plan, const std::filesystem::path& plan_directory,
                             const SimulationOptions& options = {});

nlohmann::json simulation_to_json(const schemas::Plan& plan, const PlanSimulation& simulation);

// The fullest simulated rank's predicted peak memory.
double peak_memory_bytes(const PlanSimulation& simulation);

// The data-parallel gradient buckets each pipeline rank reduces (over its stages), as priced: the
// plan's bucket size grouped by layout/gradient_buckets.h for Strata. 0 without data parallelism.
std::vector<std::size_t> gradient_buckets_per_pipeline_rank(const schemas::Plan& plan,
                                                            const PlanSimulation& simulation);

}  // namespace strata::simulator
