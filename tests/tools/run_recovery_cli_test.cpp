// What a parallel run leaves behind and comes back from, as users run it under mpirun: checkpoints
// of every expert layout resume equal to the uninterrupted run, a run of phases resumes in the
// plan in force at its checkpoint, and a stalled job says so once. The reproducers of the third
// round of adversarial inputs that need ranks; each whole run is too slow for the sanitizers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "strata_under_mpirun.h"
#include "train_log_records.h"

namespace strata::tools {
namespace {

using strata::testing::CommandResult;
using strata::testing::slurp;
using strata::testing::step_records;
using strata::testing::strata;
using strata::testing::strata_lines;
using strata::testing::strata_processes_with;
using strata::testing::strata_under_mpirun;
using strata::testing::use_mpi_test_environment;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

const std::string kMicroModel = std::string(STRATA_FIXTURES_DIR) + "/executor/gpt-micro.json";

// The losses of steps `from` (1-based) on, as logged.
std::vector<double> losses_from(const std::vector<nlohmann::json>& records, std::int64_t from) {
  std::vector<double> losses;
  for (const nlohmann::json& record : records) {
    if (record.at("step").get<std::int64_t>() >= from) {
      losses.push_back(record.at("loss").get<double>());
    }
  }
  return losses;
}

void expect_same(const std::vector<double>& got, const std::vector<double>& expected,
                 const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-6 * std::abs(expected[i])) << what << ", loss " << i;
  }
}

struct RunRecoveryCli : strata::testing::MpiCliTest {
  RunRecoveryCli() : MpiCliTest("run-recovery") {}
  // Runs `steps` steps with a checkpoint after each, then resumes from the checkpoint of step
  // `resume_at` alone: the resumed steps' losses must be the uninterrupted run's.
  void expect_resume_equals_uninterrupted(int ranks, const std::string& train, int steps,
                                          int resume_at, const std::string& what) {
    const fs::path checkpoints = directory / "checkpoints";
    fs::remove_all(checkpoints);
    const std::string run = train + " --steps " + std::to_string(steps) +
                            " --log-format json --checkpoint-dir " + checkpoints.string();
    const CommandResult whole = mpirun(ranks, run + " --checkpoint-every 1");
    ASSERT_EQ(whole.exit_code, 0) << what << ": " << whole.err;
    for (int step = resume_at + 1; step <= steps; ++step) {
      fs::remove_all(checkpoints / fmt_step(step));
    }
    const CommandResult resumed = mpirun(ranks, run + " --resume");
    ASSERT_EQ(resumed.exit_code, 0) << what << ": " << resumed.err;
    EXPECT_THAT(resumed.out, Not(HasSubstr("resume_changes"))) << what;
    expect_same(losses_from(step_records(resumed.out), resume_at + 1),
                losses_from(step_records(whole.out), resume_at + 1), what);
  }
  static std::string fmt_step(int step) {
    std::ostringstream name;
    name << "step_" << std::string(8 - std::to_string(step).size(), '0') << step;
    return name.str();
  }
};

// Experts, cp and hybrid sharding with dp before cp in the mesh order (the planner emits such
// plans): ranks holding one expert shard hold different dense shards. The run checkpoints and
// resumes equal to the uninterrupted run instead of failing after its last step.
TEST_F(RunRecoveryCli, AnExpertPlanWithCpAndHybridShardsInAnyOrderCheckpointsAndResumes) {
  const fs::path plan = directory / "hs.json";
  const CommandResult written = mpirun(4, "train --model moe-tiny --data " + tokens +
                                              " --seq-len 64 --micro-batch 1 --global-batch 4 --cp "
                                              "2 --dp 2 --dp-shard 1 --ep 2 --zero 1 "
                                              "--steps 1 "
                                              "--write-plan " +
                                              plan.string());
  ASSERT_EQ(written.exit_code, 0) << written.err;
  nlohmann::json document = nlohmann::json::parse(slurp(plan));
  document["mesh"]["order"] = "tp-dp-cp-pp";
  document.erase("content_hash");
  std::ofstream(plan) << document.dump(1);
  expect_resume_equals_uninterrupted(4, "train --plan " + plan.string() + " --data " + tokens, 3, 2,
                                     "tp-dp-cp-pp");
  // A checkpoint of another layout reshards into it.
  const fs::path from = directory / "dp4";
  ASSERT_EQ(
      mpirun(4,
             "train --model moe-tiny --seq-len 64 --micro-batch 1 --global-batch 4 --dp 4 --zero 1 "
             "--steps 2 --data " +
                 tokens + " --checkpoint-dir " + from.string())
          .exit_code,
      0);
  const fs::path resharded = directory / "resharded";
  const CommandResult reshard =
      strata("reshard --from " + (from / "step_00000002").string() + " --to-plan " + plan.string() +
             " --out " + resharded.string());
  ASSERT_EQ(reshard.exit_code, 0) << reshard.err;
  const CommandResult resumed =
      mpirun(4, "train --plan " + plan.string() + " --data " + tokens +
                    " --steps 3 --resume --checkpoint-dir " + resharded.string());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
}

// A plan set from `strata plan --phases` with a batch ramp and a context extension: a run resumed
// from a checkpoint of its second phase continues in that phase's plan (batch 8 × 64 tokens) as
// the uninterrupted run did, and reports no change, with or without --resume-with-changes.
TEST_F(RunRecoveryCli, ARunOfPhasesResumesInThePlanInForceAtItsCheckpoint) {
  const fs::path phases = directory / "phases.json";
  std::ofstream(phases) << R"({"schema_version": 1, "kind": "phases", "phases": [
      {"name": "short", "steps": 2, "global_batch_size": 4, "seq_length": 32},
      {"name": "long", "steps": 3, "global_batch_size": 8, "seq_length": 64}]})";
  const fs::path set = directory / "set.json";
  const CommandResult planned =
      strata("plan --model " + kMicroModel + " --cluster cpu-local:2 --quiet --phases " +
             phases.string() + " --out " + set.string());
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const std::string train = "train --plan " + set.string() + " --data " + tokens;
  expect_resume_equals_uninterrupted(2, train, 5, 3, "resumed in phase 2");
  const fs::path checkpoints = directory / "checkpoints";
  fs::remove_all(checkpoints / "step_00000005");
  fs::remove_all(checkpoints / "step_00000004");
  const CommandResult with_changes =
      mpirun(2, train + " --steps 5 --resume --resume-with-changes --checkpoint-dir " +
                    checkpoints.string());
  ASSERT_EQ(with_changes.exit_code, 0) << with_changes.err;
  EXPECT_THAT(with_changes.out, Not(HasSubstr("resuming with a change")));
}

// Four ranks, the last stopped: the three waiting ranks would each time out at once; they take
// turns, and the first report ends the job — one line.
TEST_F(RunRecoveryCli, AStalledJobOfFourRanksPrintsOneLine) {
  const fs::path out = directory / "stall.out", err = directory / "stall.err";
  const std::string marker = (directory / "stalled-run").string();
  const std::string command =
      std::string(STRATA_MPIEXEC) + " -np 4 --oversubscribe " + STRATA_BINARY + " train --model " +
      kMicroModel + " --data " + tokens +
      " --micro-batch 1 --global-batch 4 --seq-len 32 --dp 4 "
      "--steps 100000 --stall-timeout 3 --checkpoint-dir " +
      marker + " > " + out.string() + " 2> " + err.string() + " < /dev/null";
  const pid_t launcher = ::fork();
  if (launcher == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto started = std::chrono::steady_clock::now();
  while (slurp(out).find("/100000 | loss") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(120))
        << "no step logged: " << slurp(err);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::vector<pid_t> ranks = strata_processes_with(marker);
  ASSERT_EQ(ranks.size(), 4u);
  ASSERT_EQ(::kill(ranks.back(), SIGSTOP), 0);
  int status = 0;
  pid_t ended = 0;
  const auto stopped = std::chrono::steady_clock::now();
  while ((ended = ::waitpid(launcher, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - stopped < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(ranks.back(), SIGKILL);  // whatever happened, no stopped process outlives the test
  if (ended == 0) {
    ::kill(launcher, SIGKILL);
    ::waitpid(launcher, &status, 0);
  }
  ASSERT_EQ(ended, launcher) << "the job still hung 60 s after a rank stopped";
  EXPECT_NE(WEXITSTATUS(status), 0);
  const std::vector<std::string> messages = strata_lines(slurp(err));
  ASSERT_EQ(messages.size(), 1u) << slurp(err);
  EXPECT_THAT(messages[0], HasSubstr(": stalled: waited "));
}

}  // namespace
}  // namespace strata::tools
