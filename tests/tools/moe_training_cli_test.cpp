// `strata train` of a mixture-of-experts model (the moe-tiny preset: 8 experts, top-2, a shared
// expert, a dense first layer, load-balancing and z-losses) on one rank and under mpirun, in the
// layouts the executor runs MoE in: data parallelism with ZeRO-1 and ZeRO-3 and a 1F1B pipeline.
// Each must log the one-rank run's losses and gradient norms for 10 steps within 1e-5; the router
// losses are in every gradient, so a layout that weighed them wrongly would drift. A resume on
// another layout continues the run; the layouts not built yet are refused with the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "strata_under_mpirun.h"
#include "train_log_records.h"

namespace {

namespace fs = std::filesystem;
using strata::testing::CommandResult;
using strata::testing::step_records;
using strata::testing::strata;
using strata::testing::strata_under_mpirun;
using strata::testing::use_mpi_test_environment;
using ::testing::HasSubstr;

const std::string kText = "/usr/share/common-licenses/GPL-3";

struct MoeTrainingCli : ::testing::Test {
  void SetUp() override {
    if (!fs::exists(kText)) GTEST_SKIP() << kText << " is not installed";
    use_mpi_test_environment();
    directory = fs::path(::testing::TempDir()) /
                ("moe-cli-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory);
    fs::create_directories(directory);
    tokens = (directory / "gpl.bin").string();
    const CommandResult data = strata("data --text " + kText + " --out " + tokens);
    ASSERT_EQ(data.exit_code, 0) << data.err;
  }
  void TearDown() override { fs::remove_all(directory); }

  // 4 sequences of 32 tokens per step, in micro-batches of 2.
  std::string train(const std::string& extra) const {
    return "train --model moe-tiny --data " + tokens +
           " --micro-batch 2 --global-batch 4 --seq-len 32 --log-format json " + extra;
  }
  static void expect_same_steps(const std::vector<nlohmann::json>& expected,
                                const CommandResult& run, std::size_t first,
                                const std::string& layout) {
    ASSERT_EQ(run.exit_code, 0) << layout << ": " << run.err;
    const std::vector<nlohmann::json> got = step_records(run.out);
    ASSERT_EQ(got.size(), expected.size() - first) << layout << ": " << run.out;
    for (std::size_t i = 0; i < got.size(); ++i) {
      for (const char* field : {"loss", "gradient_norm"}) {
        const double want = expected[first + i].at(field).get<double>();
        EXPECT_NEAR(got[i].at(field).get<double>(), want, 1e-5 * std::abs(want))
            << layout << ", step " << first + i + 1 << ", " << field;
      }
    }
  }
  fs::path directory;
  std::string tokens;
};

TEST_F(MoeTrainingCli, DataParallelAndPipelineRunsLogTheSingleRankSteps) {
  const CommandResult one = strata(train("--steps 10"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  ASSERT_EQ(expected.size(), 10u) << one.out;
  // The loss falls: the router and the experts learn.
  EXPECT_LT(expected.back().at("loss").get<double>(), expected.front().at("loss").get<double>());
  for (const char* layout : {"--dp 2 --zero 1", "--dp 2 --zero 3", "--pp 2 --schedule 1f1b"}) {
    expect_same_steps(expected,
                      strata_under_mpirun(2, train(std::string("--steps 10 ") + layout), directory),
                      0, layout);
  }
}

TEST_F(MoeTrainingCli, ACheckpointOfOneLayoutResumesOnAnother) {
  // 4 steps of dp2 ZeRO-3, checkpointed at 2; resumed from step 2 as a 1F1B pipeline: steps 3
  // and 4 are the dp run's (the experts' stacked weights and their optimizer state reshard).
  const fs::path sharded = directory / "dp2";
  const CommandResult first = strata_under_mpirun(
      2,
      train("--dp 2 --zero 3 --steps 4 --checkpoint-every 2 --checkpoint-dir " + sharded.string()),
      directory);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::vector<nlohmann::json> expected = step_records(first.out);
  ASSERT_EQ(expected.size(), 4u) << first.out;
  const fs::path pipelined = directory / "pp2";
  fs::create_directories(pipelined);
  fs::copy(sharded / "step_00000002", pipelined / "step_00000002", fs::copy_options::recursive);
  expect_same_steps(
      expected,
      strata_under_mpirun(
          2, train("--pp 2 --steps 4 --resume --checkpoint-dir " + pipelined.string()), directory),
      2, "dp2 ZeRO-3 → pp2");
}

TEST_F(MoeTrainingCli, LayoutsNotBuiltForExpertsAreRefusedWithTheField) {
  // The refusal comes before the world size is compared: one process is enough to see it.
  const CommandResult tensor_parallel = strata(train("--tp 2 --sequence-parallel --steps 1"));
  EXPECT_EQ(tensor_parallel.exit_code, 1);
  EXPECT_THAT(tensor_parallel.err, HasSubstr("/mesh/tp: 2: the executor trains "
                                             "mixture-of-experts models with data and pipeline "
                                             "parallelism"));
  const CommandResult context_parallel = strata(train("--cp 2 --steps 1"));
  EXPECT_EQ(context_parallel.exit_code, 1);
  EXPECT_THAT(context_parallel.err, HasSubstr("/mesh/cp: 2:"));
}

}  // namespace
