// How many plans the simulator scores per second: the planner calls it for thousands of
// candidates. Targets (issue 3): ≥ 1,000 simulations per second per core for GPT-3 175B on
// 1,024 H100s; a 16,384-GPU Llama-3.1 405B plan well under a second. Each iteration costs the
// plan (per-layer and per-stage costs) and simulates one step, as the planner would.
#include <benchmark/benchmark.h>

#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "strata/simulator/plan_simulation.h"

namespace {

using namespace strata;

schemas::Plan gpt3_175b_on_1024_h100(std::int64_t global_batch = 1536) {
  schemas::PlanKnobs knobs;
  knobs.mesh = {.tp = 8, .cp = 1, .dp = 16, .pp = 8, .vpp = 3};
  knobs.seq_length = 2048;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = global_batch;
  knobs.sequence_parallel = true;
  knobs.zero_stage = 1;
  knobs.recompute = schemas::RecomputeGranularity::selective;
  knobs.schedule = schemas::ScheduleType::interleaved_one_f_one_b;
  return schemas::build_plan(schemas::model_preset("gpt3-175b"),
                             schemas::cluster_preset("dgx-h100:128"), knobs, "bench");
}

schemas::Plan llama_405b_on_16384_h100() {
  schemas::PlanKnobs knobs;
  knobs.mesh = {.tp = 8, .cp = 1, .dp = 128, .pp = 16, .vpp = 1};
  knobs.seq_length = 8192;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 2048;
  knobs.sequence_parallel = true;
  knobs.zero_stage = 1;
  knobs.schedule = schemas::ScheduleType::one_f_one_b;
  return schemas::build_plan(schemas::model_preset("llama3.1-405b"),
                             schemas::cluster_preset("dgx-h100:2048"), knobs, "bench");
}

void simulate_each_iteration(benchmark::State& state, const schemas::Plan& plan) {
  for (auto _ : state) {
    simulator::PlanSimulation simulation = simulator::simulate_plan(plan, {});
    benchmark::DoNotOptimize(simulation.metrics.step_time_s);
  }
  state.counters["simulations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_SimulateGpt3_175B_1024Gpus(benchmark::State& state) {
  simulate_each_iteration(state, gpt3_175b_on_1024_h100());
}
BENCHMARK(BM_SimulateGpt3_175B_1024Gpus)->Unit(benchmark::kMicrosecond);

// The same plan at the largest global batch Strata accepts: 1,048,576 micro-batches a step,
// predicted from two shorter steps (simulator/plan_simulation.h) instead of executed one by one.
void BM_SimulateGpt3_175B_1024Gpus_LargestBatch(benchmark::State& state) {
  simulate_each_iteration(state, gpt3_175b_on_1024_h100(schemas::kMaxGlobalBatchSize));
}
BENCHMARK(BM_SimulateGpt3_175B_1024Gpus_LargestBatch)->Unit(benchmark::kMicrosecond);

void BM_SimulateLlama405B_16384Gpus(benchmark::State& state) {
  simulate_each_iteration(state, llama_405b_on_16384_h100());
}
BENCHMARK(BM_SimulateLlama405B_16384Gpus)->Unit(benchmark::kMicrosecond);

// Full mode on the 1,024-GPU plan, for the ratio against symmetric mode in the same run.
void BM_SimulateGpt3_175B_1024GpusFullMode(benchmark::State& state) {
  const schemas::Plan plan = gpt3_175b_on_1024_h100();
  for (auto _ : state) {
    simulator::PlanSimulation simulation =
        simulator::simulate_plan(plan, {}, {.mode = simulator::SimulationMode::full});
    benchmark::DoNotOptimize(simulation.metrics.step_time_s);
  }
}
BENCHMARK(BM_SimulateGpt3_175B_1024GpusFullMode)->Unit(benchmark::kMillisecond);

}  // namespace
