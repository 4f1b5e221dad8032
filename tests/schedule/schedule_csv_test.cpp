#include "strata/schedule/schedule_csv.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "fixture_paths.h"
#include "input_error_message.h"
#include "strata/schedule/plan_schedule.h"
#include "strata/schedule/schedule_check.h"
#include "strata/schemas/document_loader.h"

namespace strata::schedule {
namespace {

std::filesystem::path write_temporary(const std::string& name, const std::string& text) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / (std::to_string(::getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path;
}

TEST(ScheduleCsv, RoundTripsAGeneratedSchedule) {
  PipelineSchedule schedule = interleaved_one_f_one_b_schedule(4, 2, 8);
  add_communication(schedule);
  const std::filesystem::path path = write_temporary("interleaved.csv", schedule_to_csv(schedule));
  EXPECT_EQ(read_schedule_csv(path, 4, 2, 8), schedule);
}

TEST(ScheduleCsv, ErrorsNameLineAndCell) {
  const std::filesystem::path path = write_temporary("bad.csv", "0F0,0B0\n1F0, 1X0 ,1B0\n");
  EXPECT_EQ(strata::testing::input_error_message([&] { read_schedule_csv(path, 2, 1, 1); }),
            path.string() +
                ": line 2, cell 2: \"1X0\" is not an action (e.g. 0F1, 1I0, 0W1, 2SEND_F3, "
                "1RECV_B0, 0REDUCE_GRAD, STEP)");
  const std::filesystem::path two_rows = write_temporary("two-rows.csv", "0F0,0B0\n\n1F0,1B0\n");
  EXPECT_EQ(strata::testing::input_error_message([&] { read_schedule_csv(two_rows, 3, 1, 1); }),
            two_rows.string() + ": 2 non-empty rows for pp=3; give one row per pipeline rank");
}

// The custom plan fixture: compute-only rows; sends, receives, ZeRO-3 gathers, gradient
// reduction and STEP are added and the result checked.
TEST(PlanSchedule, CustomCsvGetsCommunicationAndStepActions) {
  const std::filesystem::path plan_path =
      strata::testing::fixture("plan/valid/llama8b-h100-cp-custom.json");
  const schemas::Plan plan = schemas::load_plan_file(plan_path);
  const PipelineSchedule schedule = build_plan_schedule(plan, plan_path.parent_path());
  EXPECT_EQ(schedule.ranks[0].front(), (Action{ActionType::unshard, 0, -1}));
  EXPECT_EQ(schedule.ranks[1].back(), (Action{ActionType::optimizer_step, -1, -1}));
  EXPECT_EQ(check_schedule(schedule, "custom").peak_in_flight, (std::vector<int>{2, 1}));
}

TEST(PlanSchedule, StepActionsFollowThePlan) {
  schemas::Plan plan =
      schemas::load_plan_file(strata::testing::fixture("plan/valid/gpt2-cpu-tp2-pp2.json"));
  const StepActions step = step_actions_of(plan);
  EXPECT_FALSE(step.unshard_parameters);
  EXPECT_FALSE(step.reduce_gradients) << "dp = cp = 1";
  EXPECT_TRUE(step.tied_embedding) << "GPT-2 ties its embeddings and pp = 2";
}

}  // namespace
}  // namespace strata::schedule
