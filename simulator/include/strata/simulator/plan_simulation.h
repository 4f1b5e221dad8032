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
  schedule::PipelineSchedule schedule;
  costmodels::PlanCosts costs;
  SimulationResult result;
  StepMetrics metrics;
};

StepMetrics step_metrics(const schemas::Plan& plan, const costmodels::PlanCosts& costs,
                         const SimulationResult& result);

// `plan_directory` resolves a custom schedule's CSV file.
PlanSimulation simulate_plan(const schemas::Plan& plan, const std::filesystem::path& plan_directory,
                             const SimulationOptions& options = {});

nlohmann::json simulation_to_json(const schemas::Plan& plan, const PlanSimulation& simulation);

}  // namespace strata::simulator
