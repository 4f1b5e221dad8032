// `strata profile` as users run it: alone and under mpirun, then plan and train on what it wrote;
// and its refusals, each one line with nothing written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "strata_under_mpirun.h"

namespace {

using strata::testing::CommandResult;
using strata::testing::kMpirunErr;
using strata::testing::kMpirunOut;
using strata::testing::slurp;
using strata::testing::strata;
using strata::testing::strata_under_mpirun;
using strata::testing::use_mpi_test_environment;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;

const std::string kText = "/usr/share/common-licenses/GPL-3";

struct ProfileCli : ::testing::Test {
  void SetUp() override {
    use_mpi_test_environment();
    directory = fs::path(::testing::TempDir()) /
                ("profile-cli-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory);
    fs::create_directories(directory);
  }
  void TearDown() override { fs::remove_all(directory); }

  CommandResult mpirun(int ranks, const std::string& arguments) const {
    return strata_under_mpirun(ranks, arguments, directory);
  }
  // Every file left in the directory (an interrupted or refused profile leaves none).
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(directory)) {
      if (entry.path().filename() != kMpirunOut && entry.path().filename() != kMpirunErr) {
        names.push_back(entry.path().filename().string());
      }
    }
    return names;
  }
  fs::path directory;
};

TEST_F(ProfileCli, TwoRanksMeasureAClusterThatPlansAndTrains) {
  const std::string cluster = (directory / "cluster.json").string();
  const CommandResult profile =
      mpirun(2, "profile --quick --name two-ranks --out " + cluster + " --log-format json");
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  EXPECT_EQ(profile.err, "");
  const nlohmann::json report = nlohmann::json::parse(profile.out);
  EXPECT_TRUE(report.at("network_measured").get<bool>());
  EXPECT_EQ(report.at("closest_preset"), "cpu-local");
  // The shared-memory tier, each collective at each size measured and fitted. Each collective
  // has its own curve, so every time the transfer dominates (64 KiB and up; below, the fitted
  // latency is most of it) comes back from the cost models as measured.
  ASSERT_EQ(report.at("tiers").size(), 1u);
  for (const nlohmann::json& sample : report.at("tiers")[0].at("samples")) {
    const double measured = sample.at("measured_s").get<double>();
    const double fitted = sample.at("fitted_s").get<double>();
    EXPECT_GT(measured, 0);
    EXPECT_GT(fitted, 0);
    if (sample.at("bytes").get<double>() >= 65536) {
      EXPECT_NEAR(fitted / measured, 1.0, 0.02) << sample.dump();
    }
  }
  // Compute was measured at the start and again at the end: the drift between them.
  EXPECT_TRUE(report.at("compute_drift").is_number());
  const nlohmann::json file = nlohmann::json::parse(slurp(cluster));
  EXPECT_EQ(file.at("name"), "two-ranks");
  EXPECT_EQ(file.at("gpus_per_node"), 2);
  EXPECT_EQ(file.at("sources").at("ranks"), 2);
  EXPECT_EQ(file.at("sources").at("backend"), "cpu");
  EXPECT_THAT(file.at("sources").at("command").get<std::string>(), HasSubstr("profile --quick"));
  // Every collective the tier timed has its curve, the non-blocking all-reduce among them.
  EXPECT_EQ(file.at("network_tiers")[0].at("efficiency_by_collective").size(), 5u);
  EXPECT_TRUE(file.at("network_tiers")[0]
                  .at("efficiency_by_collective")
                  .contains("all_reduce_non_blocking"));
  for (const char* quantity : {"gemm", "memory_bandwidth", "special_functions", "attention",
                               "tier_0", "tier_0_latency", "compute_drift"}) {
    EXPECT_TRUE(file.at("sources").at("spread").contains(quantity)) << quantity;
  }
  EXPECT_GT(file.at("gpu").at("special_function_tops").get<double>(), 0);
  // The communicator's own buffers per byte of a message, each operation measured. Open MPI's
  // non-blocking all-reduce (libnbc) copies its whole buffer before it sends.
  const nlohmann::json& temporaries = file.at("communicator_temporary_bytes_per_byte");
  EXPECT_EQ(temporaries.size(), 5u);
  for (const auto& [operation, ratio] : temporaries.items()) {
    EXPECT_GE(ratio.get<double>(), 0) << operation;
    EXPECT_LE(ratio.get<double>(), 16) << operation;
  }
  EXPECT_GT(temporaries.at("all_reduce_non_blocking").get<double>(), 0.9);
  // Whether a non-blocking all-reduce advances while the ranks compute: a share, with its spread,
  // and the line that reports it.
  const double progress = file.at("communicator_progress_during_compute").get<double>();
  EXPECT_GE(progress, 0);
  EXPECT_LE(progress, 1);
  EXPECT_TRUE(file.at("sources").at("spread").contains("communicator_progress"));
  const nlohmann::json& measured_progress = report.at("communicator_progress");
  EXPECT_DOUBLE_EQ(measured_progress.at("fraction").get<double>(), progress);
  EXPECT_GT(measured_progress.at("alone_s").get<double>(), 0);
  // What the documented loop runs: validate, plan on it, train one rank on part of it.
  const CommandResult valid = strata("validate " + cluster);
  EXPECT_EQ(valid.exit_code, 0) << valid.err;
  const CommandResult plan = strata("plan --model gpt-tiny --cluster " + cluster +
                                    " --global-batch 8 --seq-len 64 --quiet --format json");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  // A data-parallel plan on it holds the gradient all-reduces' copies until the step.
  const CommandResult simulated =
      strata("simulate --model gpt-tiny --cluster " + cluster + " --dp 2 --global-batch 8 " +
             "--seq-len 64 --format json");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_GT(
      nlohmann::json::parse(simulated.out).at("stages")[0].at("communicator_bytes").get<double>(),
      0);
  if (!fs::exists(kText)) GTEST_SKIP() << kText << " is not installed";
  const std::string tokens = (directory / "gpl.bin").string();
  ASSERT_EQ(strata("data --text " + kText + " --out " + tokens).exit_code, 0);
  const CommandResult train =
      strata("train --model gpt-tiny --cluster " + cluster + " --data " + tokens +
             " --micro-batch 1 --seq-len 64 --steps 2 --log-format json");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const nlohmann::json first = nlohmann::json::parse(train.out.substr(0, train.out.find('\n')));
  EXPECT_GT(first.at("predicted_step_time_s").get<double>(), 0);
}

// A node of four ranks is measured as training's groups load it: two pairs at once, then the
// four together; each collective at each size in both shapes (send/receive between the pairs
// once), one tier fitted over all of them.
TEST_F(ProfileCli, FourRanksMeasureTheirNodeInGroupsOfTwoAndOfFour) {
  const std::string cluster = (directory / "cluster.json").string();
  const CommandResult profile =
      mpirun(4, "profile --quick --out " + cluster + " --log-format json");
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  const nlohmann::json report = nlohmann::json::parse(profile.out);
  ASSERT_EQ(report.at("tiers").size(), 1u);
  const nlohmann::json& tier = report.at("tiers")[0];
  EXPECT_EQ(tier.at("group_sizes"), nlohmann::json({2, 4}));
  std::map<std::pair<std::string, int>, int> sizes_measured;
  for (const nlohmann::json& sample : tier.at("samples")) {
    ++sizes_measured[{sample.at("collective").get<std::string>(),
                      sample.at("group_size").get<int>()}];
    EXPECT_GT(sample.at("measured_s").get<double>(), 0) << sample.dump();
    EXPECT_GT(sample.at("fitted_s").get<double>(), 0) << sample.dump();
  }
  const int message_sizes = sizes_measured.at({"all-reduce", 2});
  EXPECT_GE(message_sizes, 4);
  for (const char* collective :
       {"all-reduce", "non-blocking all-reduce", "all-gather", "reduce-scatter"}) {
    for (const int group_size : {2, 4}) {
      EXPECT_EQ((sizes_measured[{collective, group_size}]), message_sizes)
          << collective << " in groups of " << group_size;
    }
  }
  EXPECT_EQ((sizes_measured[{"send/receive", 2}]), message_sizes);
  EXPECT_EQ((sizes_measured.count({"send/receive", 4})), 0u);
  const nlohmann::json file = nlohmann::json::parse(slurp(cluster));
  EXPECT_EQ(file.at("gpus_per_node"), 4);
  EXPECT_EQ(file.at("network_tiers").size(), 1u);
  EXPECT_GT(file.at("network_tiers")[0].at("latency_us").get<double>(), 0);
  const CommandResult valid = strata("validate " + cluster);
  EXPECT_EQ(valid.exit_code, 0) << valid.err;
}

TEST_F(ProfileCli, AnUnwritableOutputIsRefusedBeforeMeasuring) {
  const CommandResult run =
      strata("profile --quick --out " + (directory / "missing" / "c.json").string());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, StartsWith("strata: --out: cannot write "));
  EXPECT_THAT(run.err, HasSubstr("its directory does not exist"));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);
  EXPECT_EQ(run.out, "");
}

// A GPU profile where it cannot run is refused before measuring, in one line: bf16 on the CPU
// backend, cuda under mpirun (one GPU's compute is what it measures), cuda without a GPU.
TEST_F(ProfileCli, AProfileTheBackendCannotMeasureIsRefusedBeforeMeasuring) {
  const std::string out = (directory / "c.json").string();
  const CommandResult bf16_on_cpu = strata("profile --quick --precision bf16 --out " + out);
  EXPECT_EQ(bf16_on_cpu.exit_code, 1);
  EXPECT_EQ(bf16_on_cpu.err,
            "strata: --precision: bf16: the CPU backend computes in fp32 (bf16 is --device "
            "cuda's)\n");
  const CommandResult two_ranks = mpirun(2, "profile --quick --device cuda --out " + out);
  EXPECT_EQ(two_ranks.exit_code, 1);
  EXPECT_THAT(two_ranks.err,
              HasSubstr("strata: --device: cuda: a GPU profile measures one GPU; run it without "
                        "mpirun (this job has 2 ranks)"));
  // No GPU visible (on a machine with one as well): the reason is the backend's, in parentheses.
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const CommandResult no_gpu = strata("profile --quick --device cuda --out " + out);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(no_gpu.exit_code, 1);
  EXPECT_THAT(no_gpu.err, StartsWith("strata: --device: cuda: no GPU to profile ("));
  EXPECT_EQ(std::count(no_gpu.err.begin(), no_gpu.err.end(), '\n'), 1);
  EXPECT_TRUE(files().empty());
}

TEST_F(ProfileCli, NodesTheWorldCannotFormEndEveryRankWithOneLine) {
  const CommandResult run =
      mpirun(3, "profile --quick --gpus-per-node 2 --out " + (directory / "c.json").string());
  EXPECT_EQ(run.exit_code, 1);
  // mpirun adds its own report of the exit status; the job's own words are one line.
  std::vector<std::string> ours;
  std::istringstream stream(run.err);
  for (std::string line; std::getline(stream, line);) {
    if (line.rfind("strata:", 0) == 0) ours.push_back(line);
  }
  EXPECT_THAT(ours, ::testing::ElementsAre(
                        "strata: --gpus-per-node: this job's 3 ranks cannot form nodes of 2: "
                        "start a multiple of 2 ranks"));
  EXPECT_TRUE(files().empty());
}

TEST_F(ProfileCli, AnInterruptedProfileSaysSoAndWritesNothing) {
  const std::string out = (directory / "c.json").string();
  const fs::path err = directory / "stderr";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::freopen(err.c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    execl(STRATA_BINARY, STRATA_BINARY, "profile", "--out", out.c_str(), nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  kill(child, SIGINT);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string message = slurp(err);
  EXPECT_THAT(message, StartsWith("strata: profile interrupted by signal 2 after "));
  EXPECT_THAT(message, HasSubstr("nothing was written to " + out));
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1);
  fs::remove(err);
  EXPECT_TRUE(files().empty());
}

}  // namespace
