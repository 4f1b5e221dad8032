#include "strata/simulator/plan_simulation.h"

#include <algorithm>
#include <cmath>

#include "strata/costmodels/kernel_time.h"
#include "strata/schedule/plan_schedule.h"

namespace strata::simulator {
namespace {

constexpr std::int64_t kExactMicroBatches = 1024;
// A step simulated action by action runs at most this many stage passes (micro-batches × stages):
// a few seconds and half a gigabyte (8 × kMaxPipelineStages² of them).
constexpr std::int64_t kMaxSimulatedStagePasses =
    std::int64_t{8} * schemas::kMaxPipelineStages * schemas::kMaxPipelineStages;

schemas::Plan with_micro_batches(const schemas::Plan& plan, std::int64_t micro_batches) {
  schemas::Plan shorter = plan;
  shorter.batch.num_micro_batches = micro_batches;
  shorter.batch.global_batch_size = micro_batches * plan.batch.micro_batch_size * plan.mesh.dp;
  return shorter;
}

PlanSimulation simulate_exactly(const schemas::Plan& plan,
                                const std::filesystem::path& plan_directory,
                                const SimulationOptions& options) {
  PlanSimulation simulation;
  simulation.schedule = schedule::build_plan_schedule(plan, plan_directory);
  simulation.costs = costmodels::plan_costs(plan);
  simulation.result = simulate(plan, simulation.schedule, simulation.costs, options);
  simulation.metrics = step_metrics(plan, simulation.costs, simulation.result);
  simulation.simulated_micro_batches = plan.batch.num_micro_batches;
  return simulation;
}

// The value at `at` on the line through (first_at, first) and (second_at, second).
double along(double first, double second, double first_at, double second_at, double at) {
  return second + (second - first) * (at - second_at) / (second_at - first_at);
}

// The step of plan.batch.num_micro_batches micro-batches from the steps of `shorter` and
// `longer` (see exact_micro_batch_limit).
SimulationResult extend(const SimulationResult& shorter, const SimulationResult& longer,
                        double shorter_count, double longer_count, double count) {
  const auto line = [&](double a, double b) {
    return along(a, b, shorter_count, longer_count, count);
  };
  SimulationResult result = longer;
  result.step_time_s = line(shorter.step_time_s, longer.step_time_s);
  result.bubble_fraction = 0;
  for (std::size_t rank = 0; rank < result.breakdown.size(); ++rank) {
    TimeBreakdown& time = result.breakdown[rank];
    const TimeBreakdown& a = shorter.breakdown[rank];
    const TimeBreakdown& b = longer.breakdown[rank];
    time.compute_s = line(a.compute_s, b.compute_s);
    time.recompute_s = line(a.recompute_s, b.recompute_s);
    time.tp_comm_s = line(a.tp_comm_s, b.tp_comm_s);
    time.cp_comm_s = line(a.cp_comm_s, b.cp_comm_s);
    time.ep_comm_s = line(a.ep_comm_s, b.ep_comm_s);
    time.host_issue_s = line(a.host_issue_s, b.host_issue_s);
    time.pp_comm_s = line(a.pp_comm_s, b.pp_comm_s);
    time.dp_comm_s = line(a.dp_comm_s, b.dp_comm_s);
    time.optimizer_s = line(a.optimizer_s, b.optimizer_s);
    time.bubble_s = line(a.bubble_s, b.bubble_s);
    result.bubble_fraction +=
        time.bubble_s / result.step_time_s / static_cast<double>(result.breakdown.size());
    RankMemory& memory = result.memory[rank];
    memory.activations_peak_bytes = line(shorter.memory[rank].activations_peak_bytes,
                                         longer.memory[rank].activations_peak_bytes);
    memory.peak_bytes = line(shorter.memory[rank].peak_bytes, longer.memory[rank].peak_bytes);
    result.peak_micro_batches_in_flight[rank] = static_cast<int>(std::llround(line(
        shorter.peak_micro_batches_in_flight[rank], longer.peak_micro_batches_in_flight[rank])));
  }
  return result;
}

nlohmann::json breakdown_to_json(const TimeBreakdown& time) {
  return {{"compute_s", time.compute_s},     {"recompute_s", time.recompute_s},
          {"tp_comm_s", time.tp_comm_s},     {"cp_comm_s", time.cp_comm_s},
          {"ep_comm_s", time.ep_comm_s},     {"host_issue_s", time.host_issue_s},
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
    metrics.breakdown.ep_comm_s += time.ep_comm_s / ranks;
    metrics.breakdown.host_issue_s += time.host_issue_s / ranks;
    metrics.breakdown.pp_comm_s += time.pp_comm_s / ranks;
    metrics.breakdown.dp_comm_s += time.dp_comm_s / ranks;
    metrics.breakdown.optimizer_s += time.optimizer_s / ranks;
    metrics.breakdown.bubble_s += time.bubble_s / ranks;
  }
  return metrics;
}

std::int64_t exact_micro_batch_limit(const schemas::Plan& plan) {
  // Past the warm-up of the deepest schedule (interleaving: about 2·pp·vpp micro-batches), and
  // within kMaxSimulatedStagePasses passes of all stages: 16·pp·vpp up to 362 stages, then less,
  // never below 8·pp·vpp (whose extension starts at 4·pp·vpp) for the stages a plan may have.
  const std::int64_t stages = plan.mesh.pp * plan.mesh.vpp;
  return std::max(kExactMicroBatches,
                  std::max(8 * stages, std::min(16 * stages, kMaxSimulatedStagePasses / stages)));
}

PlanSimulation simulate_plan(const schemas::Plan& plan, const std::filesystem::path& plan_directory,
                             const SimulationOptions& options) {
  const std::int64_t count = plan.batch.num_micro_batches;
  const std::int64_t limit = exact_micro_batch_limit(plan);
  if (plan.schedule.type == schemas::ScheduleType::custom || count <= limit) {
    return simulate_exactly(plan, plan_directory, options);
  }
  // Two multiples of pp (interleaving runs micro-batches in groups of pp), both past the warm-up.
  const std::int64_t pp = plan.mesh.pp;
  const std::int64_t shorter_count = (limit / 2 + pp - 1) / pp * pp;
  const std::int64_t longer_count = 2 * shorter_count;
  SimulationOptions shorter_options = options;
  shorter_options.record_timeline = false;
  const PlanSimulation shorter =
      simulate_exactly(with_micro_batches(plan, shorter_count), plan_directory, shorter_options);
  PlanSimulation simulation =
      simulate_exactly(with_micro_batches(plan, longer_count), plan_directory, options);
  simulation.costs = costmodels::plan_costs(plan);
  simulation.result = extend(shorter.result, simulation.result, static_cast<double>(shorter_count),
                             static_cast<double>(longer_count), static_cast<double>(count));
  simulation.metrics = step_metrics(plan, simulation.costs, simulation.result);
  return simulation;
}

std::vector<std::size_t> gradient_buckets_per_pipeline_rank(const schemas::Plan& plan,
                                                            const PlanSimulation& simulation) {
  std::vector<std::size_t> buckets(static_cast<std::size_t>(plan.mesh.pp), 0);
  for (std::size_t s = 0; s < simulation.costs.stages.size(); ++s) {
    buckets[s % buckets.size()] += simulation.costs.stages[s].gradient_buckets_s.size();
  }
  return buckets;
}

nlohmann::json simulation_to_json(const schemas::Plan& plan, const PlanSimulation& simulation) {
  const StepMetrics& metrics = simulation.metrics;
  const std::vector<std::size_t> buckets = gradient_buckets_per_pipeline_rank(plan, simulation);
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t rank = 0; rank < simulation.result.memory.size(); ++rank) {
    const RankMemory& memory = simulation.result.memory[rank];
    stages.push_back(
        {{"pipeline_rank", rank},
         {"weights_bytes", memory.weights_bytes},
         {"gradients_bytes", memory.gradients_bytes},
         {"optimizer_bytes", memory.optimizer_bytes},
         {"communicator_bytes", memory.communicator_bytes},
         {"activations_bytes", memory.activations_peak_bytes},
         {"peak_bytes", memory.peak_bytes},
         {"capacity_bytes", memory.capacity_bytes},
         {"fits", memory.fits()},
         {"micro_batches_in_flight", simulation.result.peak_micro_batches_in_flight[rank]},
         {"gradient_buckets", buckets[rank % buckets.size()]},
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

double peak_memory_bytes(const PlanSimulation& simulation) {
  double peak = 0;
  for (const RankMemory& memory : simulation.result.memory) {
    peak = std::max(peak, memory.peak_bytes);
  }
  return peak;
}

}  // namespace strata::simulator
