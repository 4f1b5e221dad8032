// Schedules tested as Megatron-LM tests its schedule order: by invariants over many shapes
// (complete, every backward after its forward, sends matched, no deadlock, in-flight counts), and
// by exact action lists for small cases written out by hand.
#include "strata/schedule/pipeline_schedule.h"

#include <gtest/gtest.h>

#include "input_error_message.h"
#include "strata/schedule/micro_batches_in_flight.h"
#include "strata/schedule/schedule_check.h"

namespace strata::schedule {
namespace {

std::string joined(const std::vector<Action>& actions) {
  std::string text;
  // Appended in two steps: `"" + to_string(...)` trips GCC 12's false-positive -Wrestrict at -O3.
  for (const Action& action : actions) {
    if (!text.empty()) text += ' ';
    text += to_string(action);
  }
  return text;
}

PipelineSchedule with_everything(PipelineSchedule schedule, bool overlap = true) {
  add_communication(schedule);
  add_step_actions(schedule, {.unshard_parameters = true,
                              .reduce_gradients = true,
                              .overlap_gradient_reduction = overlap,
                              .tied_embedding = true});
  return schedule;
}

TEST(Action, RoundTripsThroughItsText) {
  for (const char* text :
       {"2F0", "1B3", "1I3", "0W1", "1SEND_F3", "2RECV_F3", "2SEND_B3", "1RECV_B3", "0UNSHARD",
        "4RESHARD", "0REDUCE_GRAD", "7TIED_GRAD", "STEP", "12F105"}) {
    const std::optional<Action> action = parse_action(text);
    ASSERT_TRUE(action) << text;
    EXPECT_EQ(to_string(*action), text);
  }
  for (const char* text :
       {"", "F0", "0X1", "0F", "0REDUCE_GRAD1", "1SEND_F", "-1F0", "0F1x", "STEP1"}) {
    EXPECT_FALSE(parse_action(text)) << text;
  }
}

// Written out by hand: pp = 2, m = 3. Rank 0 warms up with one forward.
TEST(OneFOneB, SmallCaseByHand) {
  const PipelineSchedule schedule = one_f_one_b_schedule(2, 3);
  EXPECT_EQ(joined(schedule.ranks[0]), "0F0 0F1 0B0 0F2 0B1 0B2");
  EXPECT_EQ(joined(schedule.ranks[1]), "1F0 1B0 1F1 1B1 1F2 1B2");
  PipelineSchedule full = schedule;
  add_communication(full);
  EXPECT_EQ(joined(full.ranks[1]),
            "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2");
}

TEST(GPipe, SmallCaseByHand) {
  EXPECT_EQ(joined(gpipe_schedule(2, 1, 2).ranks[0]), "0F0 0F1 0B0 0B1");
}

// pp = 2, vpp = 2, m = 2: rank 0 holds stages 0 and 2 and warms up with 2·(2−0−1) + (2−1)·2 = 4
// forwards, i.e. all of them; rank 1 with 2 forwards, then alternates.
TEST(InterleavedOneFOneB, SmallCaseByHand) {
  const PipelineSchedule schedule = interleaved_one_f_one_b_schedule(2, 2, 2);
  EXPECT_EQ(joined(schedule.ranks[0]), "0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1");
  EXPECT_EQ(joined(schedule.ranks[1]), "1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1");
}

// pp = 2, m = 3: 1F1B's warm-up, then F and I alternate and rank r runs W of micro-batch k − r
// after I of k (PyTorch's ZB1P order); the deferred W close the list.
TEST(ZbH1, SmallCaseByHand) {
  const PipelineSchedule schedule = zb_h1_schedule(2, 3);
  EXPECT_EQ(joined(schedule.ranks[0]), "0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2");
  EXPECT_EQ(joined(schedule.ranks[1]), "1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1W2");
  const PipelineSchedule longer = zb_h1_schedule(4, 5);
  EXPECT_EQ(joined(longer.ranks[3]), "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3W2 3W3 3W4");
}

TEST(StepActions, SitAfterTheSendsOfTheLastGradient) {
  const PipelineSchedule schedule = with_everything(one_f_one_b_schedule(2, 1));
  EXPECT_EQ(joined(schedule.ranks[0]),
            "0UNSHARD 0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE_GRAD 0RESHARD 0TIED_GRAD STEP");
  EXPECT_EQ(joined(schedule.ranks[1]),
            "1RECV_F0 1UNSHARD 1F0 1B0 1SEND_B0 1REDUCE_GRAD 1RESHARD 1TIED_GRAD STEP");
  EXPECT_NO_THROW(check_schedule(schedule, "test"));
}

// Without overlap every reduction waits for the rank's whole backward (Megatron-LM's
// finalize_model_grads): with vpp = 2, rank 0's stages 0 and 2 are reduced at the end, in the
// order their last gradients finished, before the tie and the step.
TEST(StepActions, ReductionsWithoutOverlapFollowTheWholeBackward) {
  PipelineSchedule schedule = interleaved_one_f_one_b_schedule(2, 2, 2);
  add_communication(schedule);
  add_step_actions(
      schedule,
      {.reduce_gradients = true, .overlap_gradient_reduction = false, .tied_embedding = true});
  const std::string rank0 = joined(schedule.ranks[0]);
  EXPECT_EQ(rank0.substr(rank0.size() -
                         std::string("0B1 2REDUCE_GRAD 0REDUCE_GRAD 0TIED_GRAD STEP").size()),
            "0B1 2REDUCE_GRAD 0REDUCE_GRAD 0TIED_GRAD STEP");
  const std::string rank1 = joined(schedule.ranks[1]);
  EXPECT_NE(rank1.find("1SEND_B1 3REDUCE_GRAD 1REDUCE_GRAD 3TIED_GRAD STEP"), std::string::npos)
      << rank1;
  EXPECT_NO_THROW(check_schedule(schedule, "test"));
}

struct Shape {
  int pp;
  int vpp;
  int m;
};

std::vector<Shape> shapes(bool interleaved) {
  std::vector<Shape> all;
  for (int pp : {1, 2, 4, 8}) {
    for (int vpp : interleaved ? std::vector<int>{2, 4} : std::vector<int>{1}) {
      for (int m = pp; m <= 4 * pp; m += interleaved ? pp : 1) all.push_back({pp, vpp, m});
    }
  }
  return all;
}

void expect_backwards_after_forwards(const PipelineSchedule& schedule) {
  for (const std::vector<Action>& actions : schedule.ranks) {
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (!is_backward(actions[i].type)) continue;
      const Action forward{ActionType::forward, actions[i].stage, actions[i].micro_batch};
      EXPECT_NE(
          std::find(actions.begin(), actions.begin() + static_cast<std::ptrdiff_t>(i), forward),
          actions.begin() + static_cast<std::ptrdiff_t>(i))
          << to_string(actions[i]) << " before its forward";
    }
  }
}

// ZB-H1 splits 1F1B's backwards but must hold no more activations: both share the invariants.
TEST(Schedules, OneFOneBAndZbH1Invariants) {
  const std::vector<std::pair<const char*, PipelineSchedule (*)(int, int)>> generators{
      {"1f1b", one_f_one_b_schedule}, {"zb-h1", zb_h1_schedule}};
  for (const auto& [name, generate] : generators) {
    for (const Shape& shape : shapes(false)) {
      const PipelineSchedule schedule = with_everything(generate(shape.pp, shape.m));
      const ScheduleStats stats = check_schedule(schedule, name);
      expect_backwards_after_forwards(schedule);
      for (int rank = 0; rank < shape.pp; ++rank) {
        EXPECT_EQ(stats.peak_in_flight[rank], std::min(shape.pp - rank, shape.m))
            << name << " pp=" << shape.pp << " m=" << shape.m << " rank " << rank;
        // What the planner bounds memory with is what the schedule holds.
        EXPECT_EQ(stats.peak_in_flight[rank],
                  peak_micro_batches_in_flight(name == std::string("1f1b")
                                                   ? schemas::ScheduleType::one_f_one_b
                                                   : schemas::ScheduleType::zb_h1,
                                               shape.pp, 1, shape.m, rank));
      }
    }
  }
}

TEST(Schedules, GPipeHoldsEveryMicroBatch) {
  for (const Shape& shape : shapes(false)) {
    const ScheduleStats stats =
        check_schedule(with_everything(gpipe_schedule(shape.pp, 1, shape.m)), "gpipe");
    for (int peak : stats.peak_in_flight) {
      EXPECT_EQ(peak, shape.m);
      EXPECT_EQ(peak, peak_micro_batches_in_flight(schemas::ScheduleType::gpipe, shape.pp, 1,
                                                   shape.m, 0));
    }
  }
}

// Megatron's warm-up: 2·(pp − r − 1) + (vpp − 1)·pp forwards, then one more before the first
// backward, capped by the m·vpp units of the step.
TEST(Schedules, InterleavedInvariants) {
  for (const Shape& shape : shapes(true)) {
    for (bool overlap : {true, false}) {
      const PipelineSchedule schedule =
          with_everything(interleaved_one_f_one_b_schedule(shape.pp, shape.vpp, shape.m), overlap);
      const ScheduleStats stats = check_schedule(schedule, "interleaved");
      expect_backwards_after_forwards(schedule);
      for (int rank = 0; rank < shape.pp; ++rank) {
        const int warmup = 2 * (shape.pp - rank - 1) + (shape.vpp - 1) * shape.pp;
        EXPECT_EQ(stats.peak_in_flight[rank], std::min(warmup + 1, shape.m * shape.vpp))
            << "pp=" << shape.pp << " vpp=" << shape.vpp << " m=" << shape.m << " rank " << rank;
        EXPECT_EQ(stats.peak_in_flight[rank],
                  peak_micro_batches_in_flight(schemas::ScheduleType::interleaved_one_f_one_b,
                                               shape.pp, shape.vpp, shape.m, rank));
      }
    }
  }
}

TEST(CheckSchedule, NamesWhatIsMissingMisplacedOrStuck) {
  using strata::testing::input_error_message;
  PipelineSchedule missing = one_f_one_b_schedule(2, 2);
  missing.ranks[1].pop_back();
  EXPECT_EQ(input_error_message([&] { check_schedule(missing, "s.csv"); }),
            "s.csv: rank 1 has no 1B1");

  PipelineSchedule misplaced = one_f_one_b_schedule(2, 2);
  misplaced.ranks[0].push_back({ActionType::forward, 1, 0});
  EXPECT_EQ(input_error_message([&] { check_schedule(misplaced, "s.csv"); }),
            "s.csv: rank 0: 1F0: stage 1 runs on rank 1 (stage mod pp), not rank 0");

  PipelineSchedule twice = one_f_one_b_schedule(2, 2);
  twice.ranks[0].push_back({ActionType::forward, 0, 1});
  EXPECT_EQ(input_error_message([&] { check_schedule(twice, "s.csv"); }),
            "s.csv: rank 0: 0F1 appears more than once");

  // Rank 0 runs every backward before any forward: it waits for a gradient of a forward it never
  // sent.
  PipelineSchedule stuck{2,
                         1,
                         1,
                         {{{ActionType::backward, 0, 0}, {ActionType::forward, 0, 0}},
                          {{ActionType::forward, 1, 0}, {ActionType::backward, 1, 0}}}};
  add_communication(stuck);
  EXPECT_EQ(input_error_message([&] { check_schedule(stuck, "s.csv"); }),
            "s.csv: deadlock: rank 0 waits at 0RECV_B0 for 1SEND_B0; rank 1 waits at 1RECV_F0 for "
            "0SEND_F0");
}

}  // namespace
}  // namespace strata::schedule
