#include "strata/simulator/plan_simulation.h"

#include <gtest/gtest.h>

#include "strata/schedule/plan_schedule.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "strata/simulator/chrome_trace.h"

namespace strata::simulator {
namespace {

schemas::Plan gpt2_plan(std::int64_t zero_stage, schemas::ScheduleType schedule, std::int64_t vpp,
                        bool overlap_grad_reduce = true, std::int64_t global_batch = 64) {
  schemas::PlanKnobs knobs;
  knobs.overlap_grad_reduce = overlap_grad_reduce;
  knobs.mesh = {.tp = 2, .cp = 2, .dp = 4, .pp = 2, .vpp = vpp};
  knobs.seq_length = 1024;
  knobs.micro_batch_size = 2;
  knobs.global_batch_size = global_batch;
  knobs.sequence_parallel = true;
  knobs.zero_stage = zero_stage;
  knobs.recompute = schemas::RecomputeGranularity::selective;
  knobs.schedule = schedule;
  return schemas::build_plan(schemas::model_preset("gpt2-774m"),
                             schemas::cluster_preset("dgx-h100:4"), knobs, "test");
}

// Symmetric mode simulates one rank per pipeline stage; full mode all 32 with their real dp/cp
// groups and pipeline partners. They must agree on time, breakdown and memory.
TEST(PlanSimulation, SymmetricAndFullModesAgree) {
  using schemas::ScheduleType;
  for (const schemas::Plan& plan :
       {gpt2_plan(0, ScheduleType::one_f_one_b, 1),
        gpt2_plan(1, ScheduleType::interleaved_one_f_one_b, 2),
        gpt2_plan(1, ScheduleType::interleaved_one_f_one_b, 2, false),
        gpt2_plan(3, ScheduleType::zb_h1, 1), gpt2_plan(2, ScheduleType::gpipe, 1)}) {
    const PlanSimulation symmetric = simulate_plan(plan, {}, {.mode = SimulationMode::symmetric});
    const PlanSimulation full = simulate_plan(plan, {}, {.mode = SimulationMode::full});
    EXPECT_EQ(symmetric.result.simulated_ranks, 2);
    EXPECT_EQ(full.result.simulated_ranks, 32);
    EXPECT_NEAR(full.metrics.step_time_s, symmetric.metrics.step_time_s,
                1e-12 * symmetric.metrics.step_time_s);
    for (std::size_t rank = 0; rank < 2; ++rank) {
      EXPECT_NEAR(full.result.breakdown[rank].dp_comm_s, symmetric.result.breakdown[rank].dp_comm_s,
                  1e-12);
      EXPECT_DOUBLE_EQ(full.result.memory[rank].peak_bytes,
                       symmetric.result.memory[rank].peak_bytes);
    }
  }
}

TEST(PlanSimulation, BreakdownSumsToTheStepAndMetricsFollowFromIt) {
  const schemas::Plan plan = gpt2_plan(1, schemas::ScheduleType::one_f_one_b, 1);
  const PlanSimulation simulation = simulate_plan(plan, {});
  const StepMetrics& metrics = simulation.metrics;
  EXPECT_NEAR(metrics.breakdown.sum(), metrics.step_time_s, 1e-9 * metrics.step_time_s);
  EXPECT_GT(metrics.breakdown.tp_comm_s, 0);
  EXPECT_GT(metrics.breakdown.recompute_s, 0);
  EXPECT_DOUBLE_EQ(metrics.tokens_per_s, 64.0 * 1024 / metrics.step_time_s);
  EXPECT_GT(metrics.mfu, 0.01);
  EXPECT_LT(metrics.mfu, 1.0);
  EXPECT_GT(metrics.hardware_tflops_per_gpu, metrics.model_tflops_per_gpu);
  // Distributed optimizer: the optimizer state is sharded over dp·cp = 8.
  const RankMemory& memory = simulation.result.memory[0];
  EXPECT_NEAR(memory.optimizer_bytes / memory.weights_bytes, 12.0 / 2 / 8, 1e-9);
  EXPECT_TRUE(memory.fits());
}

// Reducing after the backward hides nothing: the whole reduction of the stage that finishes last
// shows, where overlapping it with that stage's last backward hides part of it.
TEST(PlanSimulation, GradientReductionAfterTheBackwardExposesMore) {
  const PlanSimulation overlapped =
      simulate_plan(gpt2_plan(1, schemas::ScheduleType::one_f_one_b, 1), {});
  const PlanSimulation after =
      simulate_plan(gpt2_plan(1, schemas::ScheduleType::one_f_one_b, 1, false), {});
  EXPECT_GT(after.metrics.breakdown.dp_comm_s, overlapped.metrics.breakdown.dp_comm_s);
  EXPECT_GT(after.metrics.step_time_s, overlapped.metrics.step_time_s);
}

TEST(PlanSimulation, ZeroThreeShardsEverythingAndHoldsGatheredWeights) {
  const PlanSimulation zero1 =
      simulate_plan(gpt2_plan(1, schemas::ScheduleType::one_f_one_b, 1), {});
  const PlanSimulation zero3 =
      simulate_plan(gpt2_plan(3, schemas::ScheduleType::one_f_one_b, 1), {});
  EXPECT_NEAR(zero3.result.memory[0].weights_bytes * 8, zero1.result.memory[0].weights_bytes, 1);
  EXPECT_GT(zero3.result.memory[0].activations_peak_bytes,
            zero1.result.memory[0].activations_peak_bytes);
  EXPECT_GT(zero3.metrics.breakdown.dp_comm_s, 0);
}

// Without pipelining, FSDP stacks gather ZeRO-3 parameters layer by layer
// (costmodels/framework_behaviour.h): they hold two layers' gathered weights where Strata's
// executor holds the whole stage, and their exposed gathers are counted as data-parallel
// communication.
TEST(PlanSimulation, FsdpStacksHoldTwoGatheredLayersNotTheWholeModel) {
  schemas::PlanKnobs knobs;
  knobs.mesh = {.tp = 1, .cp = 1, .dp = 16, .pp = 1};
  knobs.seq_length = 1024;
  knobs.global_batch_size = 64;
  knobs.zero_stage = 3;
  const schemas::Plan strata = schemas::build_plan(
      schemas::model_preset("gpt2-774m"), schemas::cluster_preset("dgx-h100:2"), knobs, "test");
  knobs.framework = schemas::TrainingFramework::torchtitan;
  const schemas::Plan torchtitan = schemas::build_plan(
      schemas::model_preset("gpt2-774m"), schemas::cluster_preset("dgx-h100:2"), knobs, "test");
  const PlanSimulation stage_wise = simulate_plan(strata, {});
  const PlanSimulation layer_wise = simulate_plan(torchtitan, {});
  EXPECT_LT(layer_wise.result.memory[0].peak_bytes, stage_wise.result.memory[0].peak_bytes);
  EXPECT_GT(layer_wise.metrics.breakdown.dp_comm_s, 0);
  EXPECT_NEAR(layer_wise.metrics.breakdown.sum(), layer_wise.metrics.step_time_s,
              1e-9 * layer_wise.metrics.step_time_s);
}

TEST(PlanSimulation, TraceHasOneProcessPerRankStreamsFlowsAndMemory) {
  const schemas::Plan plan = gpt2_plan(1, schemas::ScheduleType::one_f_one_b, 1);
  const PlanSimulation simulation = simulate_plan(plan, {}, {.record_timeline = true});
  const nlohmann::json trace = chrome_trace(simulation.result.timeline);
  int processes = 0, slices = 0, flow_starts = 0, flow_ends = 0, counters = 0;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    const std::string phase = event.at("ph");
    if (phase == "M" && event.at("name") == "process_name") ++processes;
    if (phase == "X") ++slices;
    if (phase == "s") ++flow_starts;
    if (phase == "f") ++flow_ends;
    if (phase == "C") ++counters;
  }
  EXPECT_EQ(processes, 2);
  // 64 / (2 × 4) = 8 micro-batches: F and B on each of 2 ranks, plus sends, reductions, steps.
  EXPECT_GT(slices, 4 * 8);
  EXPECT_EQ(flow_starts, 2 * 8);
  EXPECT_EQ(flow_ends, flow_starts);
  EXPECT_GT(counters, 0);
}

}  // namespace
}  // namespace strata::simulator

namespace strata::simulator {
namespace {

// A step longer than the exact limit is extended along the line through two shorter ones; for
// every generated schedule that line holds the long step's own simulation, to rounding: time,
// each stage's breakdown and memory, and the micro-batches in flight (GPipe's grow with m).
TEST(PlanSimulation, LongStepsExtendTwoShorterOnesExactly) {
  using schemas::ScheduleType;
  // 3,072 micro-batches a step: 2 × 3,072 × 4 dp = 24,576 sequences.
  for (const schemas::Plan& plan :
       {gpt2_plan(0, ScheduleType::one_f_one_b, 1, true, 24576),
        gpt2_plan(1, ScheduleType::interleaved_one_f_one_b, 2, true, 24576),
        gpt2_plan(1, ScheduleType::interleaved_one_f_one_b, 2, false, 24576),
        gpt2_plan(3, ScheduleType::zb_h1, 1, true, 24576),
        gpt2_plan(2, ScheduleType::gpipe, 1, true, 24576)}) {
    ASSERT_GT(plan.batch.num_micro_batches, exact_micro_batch_limit(plan));
    const PlanSimulation extended = simulate_plan(plan, {});
    EXPECT_LT(extended.simulated_micro_batches, plan.batch.num_micro_batches);
    const schedule::PipelineSchedule whole = schedule::build_plan_schedule(plan, {});
    const costmodels::PlanCosts costs = costmodels::plan_costs(plan);
    const SimulationResult exact = simulate(plan, whole, costs, {});
    const std::string name(schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames));
    EXPECT_NEAR(extended.result.step_time_s, exact.step_time_s, 1e-9 * exact.step_time_s) << name;
    EXPECT_NEAR(extended.result.bubble_fraction, exact.bubble_fraction, 1e-9) << name;
    for (std::size_t rank = 0; rank < exact.memory.size(); ++rank) {
      EXPECT_NEAR(extended.result.memory[rank].peak_bytes, exact.memory[rank].peak_bytes,
                  1e-9 * exact.memory[rank].peak_bytes)
          << name;
      EXPECT_NEAR(extended.result.breakdown[rank].bubble_s, exact.breakdown[rank].bubble_s,
                  1e-9 * exact.step_time_s)
          << name;
      EXPECT_EQ(extended.result.peak_micro_batches_in_flight[rank],
                exact.peak_micro_batches_in_flight[rank])
          << name;
    }
  }
}

}  // namespace
}  // namespace strata::simulator
