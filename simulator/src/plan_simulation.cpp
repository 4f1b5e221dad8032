#include "strata/simulator/plan_simulation.h"

#include "strata/costmodels/kernel_time.h"
#include "strata/schedule/plan_schedule.h"

namespace strata::simulator {
namespace {

nlohmann::json breakdown_to_json(const TimeBreakdown& time) {
  return {{"compute_s", time.compute_s},     {"recompute_s", time.recompute_s},
          {"tp_comm_s", time.tp_comm_s},     {"cp_comm_s", time.cp_comm_s},
          {"pp_comm_s", time.pp_comm_s},     {"dp_comm_s", time.dp_comm_s},
          {"optimizer_s", time.optimizer_s}, {"bubble_s", time.bubble_s}};
}

}  // namespace

StepMetrics step_metrics(const schemas::Plan& plan, const costmodels::PlanCosts& costs,
                         const SimulationResult& result) {
  StepMetrics metrics;
  metrics.step_time_s = result.step_time_s;
  const double gpus = static_cast<double>(plan.mesh.world_size());
  metrics.tokens_per_s = static_cast<double>(plan.batch.global_batch_size * plan.batch.seq_length) /
                         result.step_time_s;
  metrics.model_tflops_per_gpu = costs.model_flops_per_step / result.step_time_s / gpus / 1e12;
  metrics.hardware_tflops_per_gpu =
      costs.hardware_flops_per_step / result.step_time_s / gpus / 1e12;
  metrics.mfu =
      metrics.model_tflops_per_gpu / costmodels::peak_tflops(plan.cluster.gpu, plan.precision);
  metrics.bubble_fraction = result.bubble_fraction;
  const double ranks = static_cast<double>(result.breakdown.size());
  for (const TimeBreakdown& time : result.breakdown) {
    metrics.breakdown.compute_s += time.compute_s / ranks;
    metrics.breakdown.recompute_s += time.recompute_s / ranks;
    metrics.breakdown.tp_comm_s += time.tp_comm_s / ranks;
    metrics.breakdown.cp_comm_s += time.cp_comm_s / ranks;
    metrics.breakdown.pp_comm_s += time.pp_comm_s / ranks;
    metrics.breakdown.dp_comm_s += time.dp_comm_s / ranks;
    metrics.breakdown.optimizer_s += time.optimizer_s / ranks;
    metrics.breakdown.bubble_s += time.bubble_s / ranks;
  }
  return metrics;
}

PlanSimulation simulate_plan(const schemas::Plan& plan, const std::filesystem::path& plan_directory,
                             const SimulationOptions& options) {
  PlanSimulation simulation;
  simulation.schedule = schedule::build_plan_schedule(plan, plan_directory);
  simulation.costs = costmodels::plan_costs(plan);
  simulation.result = simulate(plan, simulation.schedule, simulation.costs, options);
  simulation.metrics = step_metrics(plan, simulation.costs, simulation.result);
  return simulation;
}

nlohmann::json simulation_to_json(const schemas::Plan& plan, const PlanSimulation& simulation) {
  const StepMetrics& metrics = simulation.metrics;
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t rank = 0; rank < simulation.result.memory.size(); ++rank) {
    const RankMemory& memory = simulation.result.memory[rank];
    stages.push_back(
        {{"pipeline_rank", rank},
         {"weights_bytes", memory.weights_bytes},
         {"gradients_bytes", memory.gradients_bytes},
         {"optimizer_bytes", memory.optimizer_bytes},
         {"activations_bytes", memory.activations_peak_bytes},
         {"peak_bytes", memory.peak_bytes},
         {"capacity_bytes", memory.capacity_bytes},
         {"fits", memory.fits()},
         {"micro_batches_in_flight", simulation.result.peak_micro_batches_in_flight[rank]},
         {"breakdown", breakdown_to_json(simulation.result.breakdown[rank])}});
  }
  return {{"model", plan.model.name},
          {"cluster", plan.cluster.name},
          {"gpus", plan.mesh.world_size()},
          {"step_time_s", metrics.step_time_s},
          {"tokens_per_s", metrics.tokens_per_s},
          {"model_tflops_per_gpu", metrics.model_tflops_per_gpu},
          {"mfu", metrics.mfu},
          {"hardware_tflops_per_gpu", metrics.hardware_tflops_per_gpu},
          {"bubble_fraction", metrics.bubble_fraction},
          {"breakdown", breakdown_to_json(metrics.breakdown)},
          {"stages", stages},
          {"simulated_ranks", simulation.result.simulated_ranks}};
}

}  // namespace strata::simulator
