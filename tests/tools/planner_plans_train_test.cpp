// What the planner ranks best, the executor runs (issue 32's property): for models (a mixture of
// experts among them), rank counts and batches, each of `strata plan --variants`'s ten best layouts
// on cpu-local trains two steps under mpirun as `strata train --plan` — none is refused. Not under
// the sanitizers: 50 jobs of a Debug build would take most of the test budget, and the code they
// run is covered there by the executor's own tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "strata_under_mpirun.h"
#include "train_log_records.h"

namespace strata::tools {
namespace {

using strata::testing::CommandResult;
using strata::testing::step_records;
using strata::testing::strata;
using strata::testing::strata_under_mpirun;
using strata::testing::use_mpi_test_environment;
namespace fs = std::filesystem;

const std::string kText = "/usr/share/common-licenses/GPL-3";

struct PlannedJob {
  std::string name, model;
  int ranks;
  std::int64_t global_batch, seq_length;
};

void PrintTo(const PlannedJob& job, std::ostream* out) { *out << job.name; }

class PlannerTopPlans : public ::testing::TestWithParam<PlannedJob> {
 protected:
  void SetUp() override {
    if (!fs::exists(kText)) GTEST_SKIP() << kText << " is not installed";
    use_mpi_test_environment();
    directory = fs::path(::testing::TempDir()) / ("planner-top-plans-" + GetParam().name);
    fs::remove_all(directory);
    fs::create_directories(directory);
    tokens = (directory / "gpl.bin").string();
    const CommandResult data = strata("data --text " + kText + " --out " + tokens);
    ASSERT_EQ(data.exit_code, 0) << data.err;
  }
  void TearDown() override { fs::remove_all(directory); }
  fs::path directory;
  std::string tokens;
};

TEST_P(PlannerTopPlans, EachOfTheTenBestTrainsTwoSteps) {
  const PlannedJob& job = GetParam();
  const fs::path first = directory / "plan.json";
  const CommandResult planned = strata(
      "plan --model " + job.model + " --cluster cpu-local:" + std::to_string(job.ranks) +
      " --global-batch " + std::to_string(job.global_batch) + " --seq-len " +
      std::to_string(job.seq_length) + " --top 10 --variants --out " + first.string() + " --quiet");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  std::vector<fs::path> plans{first};
  for (int i = 2; i <= 10; ++i)
    plans.push_back(directory / ("plan." + std::to_string(i) + ".json"));
  for (const fs::path& plan : plans) {
    ASSERT_TRUE(fs::exists(plan)) << planned.out;
    const CommandResult run = strata_under_mpirun(
        job.ranks,
        "train --plan " + plan.string() + " --data " + tokens + " --steps 2 --log-format json",
        directory);
    EXPECT_EQ(run.exit_code, 0) << plan.filename() << ": " << run.err;
    EXPECT_EQ(step_records(run.out).size(), 2u) << plan.filename() << ": " << run.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Jobs, PlannerTopPlans,
                         ::testing::Values(PlannedJob{"GptTiny2Ranks", "gpt-tiny", 2, 8, 64},
                                           PlannedJob{"LlamaTiny4Ranks", "llama-tiny", 4, 16, 128},
                                           PlannedJob{"GptTiny8Ranks", "gpt-tiny", 8, 16, 64},
                                           PlannedJob{"LlamaTiny8Ranks", "llama-tiny", 8, 16, 128},
                                           PlannedJob{"MoeTiny4Ranks", "moe-tiny", 4, 16, 64}),
                         [](const ::testing::TestParamInfo<PlannedJob>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace strata::tools
