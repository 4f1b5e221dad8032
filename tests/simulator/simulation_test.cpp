#include "strata/simulator/simulation.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "strata/schedule/pipeline_schedule.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::simulator {
namespace {

using schedule::PipelineSchedule;

// Hand-made costs: forward F_s and backward B_s per micro-batch (as input-gradient 2/3 and
// weight-gradient 1/3 of it), no communication, no optimizer, no memory.
costmodels::PlanCosts pipeline_costs(const std::vector<double>& forward_s,
                                     const std::vector<double>& backward_s, int pp) {
  costmodels::PlanCosts costs;
  for (std::size_t s = 0; s < forward_s.size(); ++s) {
    costmodels::StageCosts stage;
    stage.passes.forward.compute_s = forward_s[s];
    stage.passes.backward_input.compute_s = backward_s[s] * 2 / 3;
    stage.passes.backward_weight.compute_s = backward_s[s] / 3;
    costs.stages.push_back(stage);
  }
  costs.rank_states.assign(static_cast<std::size_t>(pp), {});
  costs.optimizer_step_s.assign(static_cast<std::size_t>(pp), 0.0);
  costs.capacity_bytes = 1;
  return costs;
}

PipelineSchedule with_communication(PipelineSchedule schedule) {
  schedule::add_communication(schedule);
  schedule::add_step_actions(schedule, {});
  return schedule;
}

schemas::Plan plan_with_pipeline(std::int64_t pp) {
  schemas::Plan plan;
  plan.mesh.pp = pp;
  return plan;
}

// A balanced 1F1B pipeline with free communication idles p−1 slots of F+B on every rank:
// step = (m + p − 1)·(F + B) and bubble = (p − 1)/(m + p − 1), exactly.
TEST(Simulation, BalancedOneFOneBHasTheTextbookBubble) {
  for (int pp : {2, 4, 8}) {
    for (int m : {pp, 2 * pp, 4 * pp}) {
      const std::vector<double> forward(static_cast<std::size_t>(pp), 1.0);
      const std::vector<double> backward(static_cast<std::size_t>(pp), 2.0);
      const SimulationResult result = simulate(
          plan_with_pipeline(pp), with_communication(schedule::one_f_one_b_schedule(pp, m)),
          pipeline_costs(forward, backward, pp), {});
      EXPECT_DOUBLE_EQ(result.step_time_s, (m + pp - 1) * 3.0) << "pp=" << pp << " m=" << m;
      EXPECT_NEAR(result.bubble_fraction, static_cast<double>(pp - 1) / (m + pp - 1), 1e-12)
          << "pp=" << pp << " m=" << m;
      // Stage i holds p − i micro-batches in flight.
      for (int rank = 0; rank < pp; ++rank) {
        EXPECT_EQ(result.peak_micro_batches_in_flight[static_cast<std::size_t>(rank)],
                  std::min(m, pp - rank));
      }
    }
  }
}

// A slow last stage (a heavy LM head) sets the pace: with per-stage F_i + B_i, 1F1B takes
// Σ_i (F_i + B_i) + (m − 1)·max_i (F_i + B_i). Making the last of 4 stages slower by δ in forward
// and 2δ in backward adds 3δ·m to the step.
TEST(Simulation, ASlowStageMovesTheStepByItsExcessTimesMicroBatches) {
  const int pp = 4;
  const int m = 12;
  const double delta = 0.25;
  std::vector<double> forward(pp, 1.0);
  std::vector<double> backward(pp, 2.0);
  const PipelineSchedule schedule = with_communication(schedule::one_f_one_b_schedule(pp, m));
  const double balanced =
      simulate(plan_with_pipeline(pp), schedule, pipeline_costs(forward, backward, pp), {})
          .step_time_s;
  forward[pp - 1] += delta;
  backward[pp - 1] += 2 * delta;
  const SimulationResult slow =
      simulate(plan_with_pipeline(pp), schedule, pipeline_costs(forward, backward, pp), {});
  EXPECT_DOUBLE_EQ(balanced, (m + pp - 1) * 3.0);
  EXPECT_DOUBLE_EQ(slow.step_time_s, balanced + 3 * delta * m);
}

// Zero-bubble H1 (Qi et al. 2023): input gradients go upstream without waiting for weight
// gradients, which fill the cool-down. Its bubble is (p − 1)(F + I − W) against 1F1B's
// (p − 1)(F + I + W): with F = 1, I = 4/3, W = 2/3, p = 4, m = 8 the step is m·3 + 3·5/3 = 29
// against (m + p − 1)·3 = 33, with the same micro-batches in flight.
TEST(Simulation, ZeroBubbleH1ReachesItsPublishedBubble) {
  const int pp = 4;
  const int m = 8;
  const costmodels::PlanCosts costs =
      pipeline_costs(std::vector<double>(pp, 1.0), std::vector<double>(pp, 2.0), pp);
  const SimulationResult zb = simulate(
      plan_with_pipeline(pp), with_communication(schedule::zb_h1_schedule(pp, m)), costs, {});
  const SimulationResult one_f_one_b = simulate(
      plan_with_pipeline(pp), with_communication(schedule::one_f_one_b_schedule(pp, m)), costs, {});
  EXPECT_DOUBLE_EQ(one_f_one_b.step_time_s, 33.0);
  EXPECT_NEAR(zb.step_time_s, m * 3.0 + (pp - 1) * (1.0 + 4.0 / 3 - 2.0 / 3), 1e-9);
  EXPECT_EQ(zb.peak_micro_batches_in_flight, one_f_one_b.peak_micro_batches_in_flight);
}

// Send time on the critical path: with a p2p transfer of c per boundary, the first forward
// reaches the last stage (p − 1)·c later and the last gradient returns (p − 1)·c later; in the
// steady state each round trip to the next stage may wait for it too.
TEST(Simulation, PointToPointLatencyLengthensThePipelineFillAndDrain) {
  const int pp = 4;
  const int m = 8;
  costmodels::PlanCosts costs =
      pipeline_costs(std::vector<double>(pp, 1.0), std::vector<double>(pp, 2.0), pp);
  const double c = 0.01;
  for (std::size_t s = 0; s < costs.stages.size(); ++s) {
    if (s + 1 < costs.stages.size()) costs.stages[s].send_forward_s = c;
    if (s > 0) costs.stages[s].send_backward_s = c;
  }
  const SimulationResult result = simulate(
      plan_with_pipeline(pp), with_communication(schedule::one_f_one_b_schedule(pp, m)), costs, {});
  // At least the fill and the drain pay it; at most every slot of the step does.
  EXPECT_GE(result.step_time_s, (m + pp - 1) * 3.0 + 2 * (pp - 1) * c - 1e-9);
  EXPECT_LE(result.step_time_s, (m + pp - 1) * (3.0 + 2 * c) + 1e-9);
  EXPECT_GT(result.breakdown[pp - 1].pp_comm_s, 0);
}

// Blocking pipeline sends (DeepSpeed's pipeline engine) hold the sender's next compute. GPipe on
// pp = 2, m = 4, F = 1, B = 2, a send of c = 0.25: non-blocking, only the first forward's and the
// last gradient's sends are exposed, 15 + 2c = 15.5. Blocking, each of the m − 1 later forwards
// on rank 0 and backwards on rank 1 starts c later: 15.5 + 2(m − 1)c = 17.
TEST(Simulation, BlockingPipelineSendsDelayTheSendersNextCompute) {
  const int pp = 2;
  const int m = 4;
  const double c = 0.25;
  costmodels::PlanCosts costs =
      pipeline_costs(std::vector<double>(pp, 1.0), std::vector<double>(pp, 2.0), pp);
  costs.stages[0].send_forward_s = c;
  costs.stages[1].send_backward_s = c;
  const PipelineSchedule schedule = with_communication(schedule::gpipe_schedule(pp, 1, m));
  schemas::Plan plan = plan_with_pipeline(pp);
  EXPECT_DOUBLE_EQ(simulate(plan, schedule, costs, {}).step_time_s, 15.5);
  plan.framework = schemas::TrainingFramework::deepspeed;
  const SimulationResult blocking = simulate(plan, schedule, costs, {});
  EXPECT_DOUBLE_EQ(blocking.step_time_s, 17.0);
  // Both stalls count as pipeline communication on rank 1: its own 4 blocked backward sends
  // (m·c) and the m − 1 forwards that arrive c later than it could take them.
  const SimulationResult free_sends = simulate(plan_with_pipeline(pp), schedule, costs, {});
  EXPECT_DOUBLE_EQ(blocking.breakdown[1].pp_comm_s - free_sends.breakdown[1].pp_comm_s,
                   (2 * m - 1) * c);
}

// Gradient reduction with two 0.5 s buckets per stage on pp = 2, m = 4, F = 1, B = 2: the
// pipeline alone ends at (m + p − 1)·3 = 15 with rank 0's last backward over [13, 15].
// Overlapped, that stage's buckets are ready at 14 and 15 (as the backward walks back through its
// layers), so only the last one shows: 15.5. Reduced after the backward, both wait until 15: 16.
TEST(Simulation, GradientReductionOverlapsTheLastBackwardOrFollowsIt) {
  const int pp = 2;
  const int m = 4;
  costmodels::PlanCosts costs =
      pipeline_costs(std::vector<double>(pp, 1.0), std::vector<double>(pp, 2.0), pp);
  for (costmodels::StageCosts& stage : costs.stages) stage.gradient_buckets_s = {0.5, 0.5};
  for (bool overlap : {true, false}) {
    schemas::Plan plan = plan_with_pipeline(pp);
    plan.mesh.dp = 2;
    plan.overlap_grad_reduce = overlap;
    PipelineSchedule schedule = schedule::one_f_one_b_schedule(pp, m);
    schedule::add_communication(schedule);
    schedule::add_step_actions(schedule,
                               {.reduce_gradients = true, .overlap_gradient_reduction = overlap});
    const SimulationResult result = simulate(plan, schedule, costs, {});
    EXPECT_DOUBLE_EQ(result.step_time_s, overlap ? 15.5 : 16.0) << "overlap " << overlap;
    EXPECT_DOUBLE_EQ(result.breakdown[0].dp_comm_s, overlap ? 0.5 : 1.0) << "overlap " << overlap;
  }
}

// The same overlapped reduction on a communicator that advances a collective only partly while
// its rank computes (communicator_progress_during_compute p): a bucket's p share runs from where
// the backward filled it (14, 15), the rest once the rank stops computing (15). p = 0 is the
// reduction after the backward (16); p = 0.25: bucket 0's 0.125 over [14, 14.125], its 0.375
// over [15, 15.375], bucket 1 over [15.375, 15.875]; p = 1 (absent) is full overlap (15.5).
TEST(Simulation, ACommunicatorThatDoesNotProgressDuringComputeHidesLess) {
  const int pp = 2;
  const int m = 4;
  costmodels::PlanCosts costs =
      pipeline_costs(std::vector<double>(pp, 1.0), std::vector<double>(pp, 2.0), pp);
  for (costmodels::StageCosts& stage : costs.stages) stage.gradient_buckets_s = {0.5, 0.5};
  for (const auto& [progress, step_s] :
       std::vector<std::pair<double, double>>{{0.0, 16.0}, {0.25, 15.875}, {1.0, 15.5}}) {
    schemas::Plan plan = plan_with_pipeline(pp);
    plan.mesh.dp = 2;
    plan.overlap_grad_reduce = true;
    plan.cluster.communicator_progress_during_compute = progress;
    PipelineSchedule schedule = schedule::one_f_one_b_schedule(pp, m);
    schedule::add_communication(schedule);
    schedule::add_step_actions(schedule,
                               {.reduce_gradients = true, .overlap_gradient_reduction = true});
    const SimulationResult result = simulate(plan, schedule, costs, {});
    EXPECT_DOUBLE_EQ(result.step_time_s, step_s) << "progress " << progress;
    EXPECT_DOUBLE_EQ(result.breakdown[0].dp_comm_s, step_s - 15.0) << "progress " << progress;
  }
}

// The simulator starts a reduction where the action list puts it: a custom schedule that moves
// rank 0's REDUCE_GRAD of stage 2 (interleaved, pp = 2, vpp = 2) behind the next backward gets no
// overlap with stage 2's last backward, even though the plan overlaps reductions.
TEST(Simulation, AReductionPlacedAfterLaterComputeWaitsForIt) {
  const int pp = 2;
  costmodels::PlanCosts costs =
      pipeline_costs(std::vector<double>(4, 1.0), std::vector<double>(4, 2.0), pp);
  for (costmodels::StageCosts& stage : costs.stages) stage.gradient_buckets_s = {0.5, 0.5};
  schemas::Plan plan = plan_with_pipeline(pp);
  plan.mesh.dp = 2;
  plan.mesh.vpp = 2;
  PipelineSchedule schedule = schedule::interleaved_one_f_one_b_schedule(pp, 2, 4);
  schedule::add_communication(schedule);
  schedule::add_step_actions(schedule, {.reduce_gradients = true});
  std::vector<schedule::Action>& rank0 = schedule.ranks[0];
  const schedule::Action reduce2{schedule::ActionType::reduce_grad, 2, -1};
  auto at = rank0.erase(std::find(rank0.begin(), rank0.end(), reduce2));
  while (at->type != schedule::ActionType::backward) ++at;
  const std::string later_backward = schedule::to_string(*at);
  rank0.insert(at + 1, reduce2);
  const SimulationResult result = simulate(plan, schedule, costs, {.record_timeline = true});
  double later_backward_end = -1;
  double reduction_start = -1;
  for (const TimelineSlice& slice : result.timeline.slices) {
    if (slice.rank != 0) continue;
    if (slice.name == later_backward) later_backward_end = slice.start_s + slice.duration_s;
    if (slice.name == "REDUCE_GRAD 2 bucket 0") reduction_start = slice.start_s;
  }
  ASSERT_GT(later_backward_end, 0) << later_backward;
  EXPECT_GE(reduction_start, later_backward_end);
}

}  // namespace
}  // namespace strata::simulator
