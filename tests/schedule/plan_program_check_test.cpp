// check_plan_program: every built-in schedule of the plans the runtime runs passes, and each way
// an action list can ask for what its plan does not do is refused before the first step with the
// rank and the action named.
#include "strata/schedule/plan_program_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "input_error_message.h"
#include "strata/schedule/plan_schedule.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::schedule {
namespace {

using schedule::Action;
using schedule::ActionType;
using ::testing::HasSubstr;

schemas::Plan pipeline_plan(std::int64_t dp, std::int64_t pp, std::int64_t vpp,
                            std::int64_t zero_stage, schemas::ScheduleType type, bool tied = true) {
  schemas::ModelConfig model = schemas::model_preset("gpt-tiny");
  model.tied_embeddings = tied;
  schemas::PlanKnobs knobs;
  knobs.mesh.dp = dp;
  knobs.mesh.pp = pp;
  knobs.mesh.vpp = vpp;
  knobs.seq_length = 32;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 4 * dp;
  knobs.zero_stage = zero_stage;
  knobs.schedule = type;
  knobs.precision = schemas::Dtype::fp32;
  return schemas::build_plan(
      model, schemas::resolve_cluster("cpu-local:" + std::to_string(dp * pp)), knobs, "test");
}

std::string refusal(const schedule::PipelineSchedule& schedule, const schemas::Plan& plan) {
  return strata::testing::input_error_message(
      [&] { check_plan_program(schedule, plan, "plan.json"); });
}

void erase_first(std::vector<Action>& actions, ActionType type) {
  const auto found = std::find_if(actions.begin(), actions.end(),
                                  [&](const Action& action) { return action.type == type; });
  ASSERT_NE(found, actions.end());
  actions.erase(found);
}

TEST(PlanProgram, EveryBuiltInScheduleOfARunnablePlanPasses) {
  using schemas::ScheduleType;
  for (const schemas::Plan& plan :
       {pipeline_plan(1, 2, 1, 0, ScheduleType::one_f_one_b),
        pipeline_plan(2, 2, 1, 1, ScheduleType::gpipe),
        pipeline_plan(2, 2, 1, 3, ScheduleType::zb_h1),
        pipeline_plan(2, 4, 1, 2, ScheduleType::one_f_one_b, false),
        pipeline_plan(1, 2, 2, 3, ScheduleType::interleaved_one_f_one_b)}) {
    EXPECT_NO_THROW(check_plan_program(schedule::build_plan_schedule(plan, "."), plan, "plan"))
        << plan.mesh.dp << " " << plan.mesh.pp << " " << plan.zero_stage;
  }
}

TEST(PlanProgram, RefusesWhatThePlanDoesNotDo) {
  using schemas::ScheduleType;
  // An UNSHARD in a plan whose parameters are whole.
  const schemas::Plan zero1 = pipeline_plan(2, 2, 1, 1, ScheduleType::one_f_one_b);
  schedule::PipelineSchedule unshard = schedule::build_plan_schedule(zero1, ".");
  unshard.ranks[1].insert(unshard.ranks[1].begin(), Action{ActionType::unshard, 1, -1});
  EXPECT_THAT(refusal(unshard, zero1),
              HasSubstr("plan.json: rank 1: 1UNSHARD: the plan's ZeRO stage 1 keeps every "
                        "stage's parameters whole"));

  // dp 2 without the stage's gradient reduction: the replicas would drift apart.
  schedule::PipelineSchedule unreduced = schedule::build_plan_schedule(zero1, ".");
  erase_first(unreduced.ranks[0], ActionType::reduce_grad);
  EXPECT_THAT(refusal(unreduced, zero1),
              HasSubstr("rank 0: 0REDUCE_GRAD: appears 0 times; with dp·cp = 2"));

  // A reduction before the stage's last backward.
  schedule::PipelineSchedule early = schedule::build_plan_schedule(zero1, ".");
  std::vector<Action>& first = early.ranks[0];
  erase_first(first, ActionType::reduce_grad);
  first.insert(first.begin(), Action{ActionType::reduce_grad, 0, -1});
  EXPECT_THAT(refusal(early, zero1), HasSubstr("rank 0: 0REDUCE_GRAD: comes before the stage's "
                                               "last backward (0B3)"));

  // The tied embedding left untied on the last stage.
  schedule::PipelineSchedule untied = schedule::build_plan_schedule(zero1, ".");
  erase_first(untied.ranks[1], ActionType::tied_embedding_grad);
  EXPECT_THAT(refusal(untied, zero1), HasSubstr("rank 1: 1TIED_GRAD: appears 0 times"));

  // A tie where nothing is tied.
  const schemas::Plan separate = pipeline_plan(1, 2, 1, 0, ScheduleType::one_f_one_b, false);
  schedule::PipelineSchedule tie = schedule::build_plan_schedule(separate, ".");
  tie.ranks[0].insert(tie.ranks[0].end() - 1, Action{ActionType::tied_embedding_grad, 0, -1});
  EXPECT_THAT(refusal(tie, separate), HasSubstr("rank 0: 0TIED_GRAD: nothing is tied"));

  // ZeRO-3: a forward without its stage's parameters.
  const schemas::Plan zero3 = pipeline_plan(2, 2, 1, 3, ScheduleType::one_f_one_b);
  schedule::PipelineSchedule ungathered = schedule::build_plan_schedule(zero3, ".");
  erase_first(ungathered.ranks[0], ActionType::unshard);
  EXPECT_THAT(refusal(ungathered, zero3),
              HasSubstr("rank 0: 0F0: runs without its parameters: under ZeRO-3 it needs "
                        "0UNSHARD before it"));

  // STEP in the middle.
  schedule::PipelineSchedule step_first = schedule::build_plan_schedule(zero3, ".");
  step_first.ranks[1].insert(step_first.ranks[1].begin(),
                             Action{ActionType::optimizer_step, -1, -1});
  EXPECT_THAT(refusal(step_first, zero3),
              HasSubstr("rank 1: STEP: STEP comes once, as the rank's last action"));
}

}  // namespace
}  // namespace strata::schedule
