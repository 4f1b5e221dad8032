// Bad and extreme input as an adversarial user gives it: every case ends with exit 1 (input) or
// 2 (usage) and one `strata:` line naming the flag or file, the path and the rule — never NaN in
// a plan, unbounded work, an "internal error" or a value echoed back whole.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "strata_command.h"
#include "train_log_records.h"

namespace strata::tools {
namespace {

using strata::testing::CommandResult;
using strata::testing::lines;
using strata::testing::slurp;
using strata::testing::strata;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
namespace fs = std::filesystem;

const fs::path kFixtures = STRATA_FIXTURES_DIR;

struct HardeningCli : ::testing::Test {
  void SetUp() override {
    directory = fs::path(::testing::TempDir()) /
                ("hardening-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory);
    fs::create_directories(directory);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path path = directory / name;
    std::ofstream(path) << text;
    return path;
  }
  // One line on stderr, starting "strata: ", with the given exit status.
  static void expect_refused(const CommandResult& result, int exit_code, const std::string& text) {
    EXPECT_EQ(result.exit_code, exit_code) << result.err;
    EXPECT_EQ(lines(result.err), 1u) << result.err;
    EXPECT_THAT(result.err, StartsWith("strata: "));
    EXPECT_THAT(result.err, HasSubstr(text));
    EXPECT_THAT(result.err, Not(HasSubstr("internal error")));
  }
  fs::path directory;
};

TEST_F(HardeningCli, NonFiniteFlagValuesAreRefusedNamingTheFlag) {
  expect_refused(strata("plan --model llama3.1-8b --cluster dgx-h100 --global-batch 64 "
                        "--seq-len 4096 --memory-reserve nan"),
                 2, "--memory-reserve: nan is not a finite number");
  for (const char* flag : {"--lr", "--grad-clip", "--weight-decay", "--min-lr-fraction"}) {
    expect_refused(strata(std::string("train --model gpt-tiny --data x.bin ") + flag + " nan"), 2,
                   std::string(flag) + ": nan is not a finite number");
  }
  expect_refused(strata("train --model gpt-tiny --data x.bin --lr inf"), 2,
                 "--lr: inf is not a finite number");
  // Ranges read as people write them, not as 309 digits of the largest double.
  const CommandResult steps = strata("train --model gpt-tiny --data x.bin --steps -1");
  expect_refused(steps, 2, "--steps: -1 is not a whole number from 0 to 1099511627776");
  EXPECT_LT(steps.err.size(), 200u);
  expect_refused(strata("train --model gpt-tiny --data x.bin --seed -1"), 2,
                 "--seed: -1 is not a whole number from 0 to 18446744073709551615");
  expect_refused(strata("train --model gpt-tiny --data x.bin --seed 18446744073709551616"), 2,
                 "--seed: 18446744073709551616 is not a whole number");
  expect_refused(strata("plna"), 2, "unknown subcommand \"plna\"; did you mean \"plan\"?");
}

// Every reserve the flag accepts gives plans whose predicted memory fits, and `validate` refuses
// a plan file whose own prediction does not.
TEST_F(HardeningCli, PlansFitForEveryReserveAndValidateChecksTheFit) {
  for (const char* reserve : {"0", "0.5", "0.9"}) {
    const fs::path out = directory / (std::string("plan-") + reserve + ".json");
    const CommandResult run =
        strata(std::string("plan --model llama3.1-8b --cluster dgx-h100 --global-batch 64 "
                           "--seq-len 4096 --top 3 --format json --memory-reserve ") +
               reserve + " --out " + out.string());
    if (run.exit_code == 1) {  // at a 0.9 reserve nothing may fit: said so, nothing written
      EXPECT_THAT(run.err, HasSubstr("no plan fits"));
      EXPECT_FALSE(fs::exists(out));
      continue;
    }
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json report = nlohmann::json::parse(run.out);
    for (const nlohmann::json& plan : report.at("plans")) {
      EXPECT_LE(plan.at("peak_memory_bytes").get<double>(),
                plan.at("capacity_bytes").get<double>());
    }
    EXPECT_EQ(strata("validate " + out.string()).exit_code, 0);
  }
  nlohmann::json plan =
      nlohmann::json::parse(slurp(kFixtures / "plan/valid/llama70b-h100-uneven-predicted.json"));
  plan["predicted"]["peak_memory_bytes_per_pipeline_rank"][1] = std::int64_t{128204773785};
  expect_refused(strata("validate " + write("over.json", plan.dump()).string()), 1,
                 "/predicted/peak_memory_bytes_per_pipeline_rank/1: 119.4 GiB is more than the");
}

// The largest accepted global batch plans and simulates (the simulator extends two shorter steps
// instead of listing 16M micro-batches); one above it is refused with the limit.
TEST_F(HardeningCli, BatchesHaveALimitAndTheLargestRunsInBoundedWork) {
  expect_refused(strata("plan --global-batch 2147483647"), 2,
                 "--global-batch: 2147483647 is not a whole number from 1 to 16777216");
  const CommandResult plan = strata("plan --model gpt2-124m --global-batch 16777216 --quiet");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  const CommandResult simulate =
      strata("simulate --model gpt2-124m --cluster dgx-h100 --global-batch 16777216 --pp 8");
  EXPECT_EQ(simulate.exit_code, 0) << simulate.err;
  EXPECT_THAT(simulate.out, HasSubstr("micro-batch 1 × 16777216"));
  // `strata schedule` lists every action: a 16M micro-batch step is refused there, not listed.
  const fs::path plan_file = directory / "huge.json";
  strata(
      "train --model gpt-tiny --data missing.bin --global-batch 16777216 --micro-batch 1 "
      "--write-plan " +
      plan_file.string());
  expect_refused(strata("schedule --plan " + plan_file.string()), 1,
                 "/batch/num_micro_batches: 16777216 micro-batches make about");
}

// Numbers a double cannot hold, and numbers 100,000 digits long: an input error at the value's
// JSON path, the value shortened.
TEST_F(HardeningCli, OverflowingJsonNumbersAreInputErrorsAtTheirPath) {
  nlohmann::json model = nlohmann::json::parse(slurp(kFixtures / "executor/gpt-micro.json"));
  std::string text = model.dump();
  text.replace(text.find("\"num_layers\":2"), 14, "\"num_layers\":1e999999999");
  expect_refused(strata("validate " + write("overflow.json", text).string()), 1,
                 "overflow.json: /num_layers: 1e999999999 is too large for a number");
  text = model.dump();
  text.replace(text.find("\"num_layers\":2"), 14, "\"num_layers\":" + std::string(100000, '7'));
  const CommandResult digits = strata("validate " + write("digits.json", text).string());
  expect_refused(digits, 1, "digits.json: /num_layers: 7777");
  EXPECT_LT(digits.err.size(), 300u);
  const std::string long_name(300, 'x');
  const CommandResult name = strata("plan --model " + long_name);
  expect_refused(name, 1, "--model: \"xxxx");
  EXPECT_LT(name.err.size(), 300u);
}

TEST_F(HardeningCli, PublishedRunRowsAreReadStrictly) {
  const std::string row =
      slurp(kFixtures / "validation/published_runs_sample.jsonl")
          .substr(0, slurp(kFixtures / "validation/published_runs_sample.jsonl").find('\n'));
  const auto run = [&](const std::string& from, const std::string& to) {
    std::string changed = row;
    const std::size_t at = changed.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    changed.replace(at, from.size(), to);
    return strata("validate-sim " + write("rows.jsonl", changed + "\n").string());
  };
  expect_refused(run("\"seq_length\": 2048", "\"seq_length\": 0"), 1,
                 "rows.jsonl:1: /model/seq_length: 0 is below the minimum 1");
  expect_refused(run("\"iteration_time_s\": 3.53", "\"iteration_time_s\": -1"), 1,
                 "/measured/iteration_time_s: -1 must be greater than 0");
  expect_refused(run("\"iteration_time_s\": 3.53", "\"iteration_time_s\": 0"), 1,
                 "/measured/iteration_time_s: 0 must be greater than 0");
  expect_refused(run("\"iteration_time_s\": 3.53", "\"iteration_time_s\": \"3.53\""), 1,
                 "/measured/iteration_time_s: expected a number, got a string");
  expect_refused(run("\"global_batch_size\": 512", "\"global_batch_size\": 1099511627776"), 1,
                 "/parallel/global_batch_size: 1099511627776 is above the maximum 16777216");
  expect_refused(run("\"tier\": \"A\"", "\"tier\": \"A\", \"colour\": 1"), 1,
                 "/colour: unknown key");
  expect_refused(run("\"gpu\": \"a100-sxm4-80gb\"", "\"gpu\": null"), 1,
                 "/system/gpu: required in a complete row");
  expect_refused(strata("validate-sim " + write("array.jsonl", "[1, 2]\n").string()), 1,
                 "array.jsonl:1: expected an object, got an array");
}

// A custom schedule that is not one, or that deadlocks, fails `validate` as it fails `schedule`.
TEST_F(HardeningCli, ValidateRunsTheScheduleChecks) {
  const std::string plan = slurp(kFixtures / "plan/valid/llama8b-h100-cp-custom.json");
  write("plan.json", plan);
  write("llama8b-schedule.csv", "this is not, a schedule\n");
  expect_refused(strata("validate " + (directory / "plan.json").string()), 1,
                 "llama8b-schedule.csv");
  // Rank 0 waits for backward 0 before sending forward 0, which that backward needs.
  const std::string valid = slurp(kFixtures / "plan/valid/llama8b-schedule.csv");
  write("llama8b-schedule.csv", "0B0,0F0" + valid.substr(valid.find(",0F1")));
  expect_refused(strata("validate " + (directory / "plan.json").string()), 1,
                 "llama8b-schedule.csv");
}

// One admission rule for a custom schedule: what validate refuses, simulate and schedule refuse
// with the same line (and train, tools/parallel_cli_test.cpp) — never a simulation that stalls or
// predicts a time for a list the executor would not run.
TEST_F(HardeningCli, ValidateSimulateAndScheduleAdmitTheSameSchedules) {
  write("plan.json", slurp(kFixtures / "plan/valid/llama8b-h100-cp-custom.json"));
  write("llama8b-schedule.csv", slurp(kFixtures / "plan/valid/llama8b-schedule.csv"));
  const std::string plan = (directory / "plan.json").string();
  // The fixture's lists with their per-step actions (ZeRO-3 gathers, the dp·cp gradient
  // reduction, STEP), as `schedule --write-csv` writes them: the starting point a user edits.
  ASSERT_EQ(strata("schedule --plan " + plan + " --write-csv " + (directory / "full.csv").string())
                .exit_code,
            0);
  const std::string full = slurp(directory / "full.csv");
  const std::size_t newline = full.find('\n');
  const std::string rank0 = full.substr(0, newline);
  const std::string rank1 = full.substr(newline + 1, full.find('\n', newline + 1) - newline - 1);
  // `row` with `action` taken out (the last match: STEP is the row's last, 1REDUCE_GRAD once).
  const auto without = [](std::string row, const std::string& action) {
    const std::size_t at = row.rfind(action);
    EXPECT_NE(at, std::string::npos) << action << " in " << row;
    return at == 0 ? row.substr(action.size() + 1) : row.erase(at - 1, action.size() + 1);
  };
  std::string step_early = rank0;
  ASSERT_NE(step_early.rfind("0RESHARD,STEP"), std::string::npos) << rank0;
  step_early.replace(step_early.rfind("0RESHARD,STEP"), 13, "STEP,0RESHARD");
  struct Case {
    std::string rows, expected;
  };
  const std::vector<Case> cases = {
      // STEP on one rank only: the simulator used to wait for the other forever (internal error).
      {rank0 + "\n" + without(rank1, "STEP") + "\n",
       "rank 1: 1RESHARD: a rank's action list ends with STEP, the optimizer step"},
      // STEP before the rank's last action (it would free the parameters after the update).
      {step_early + "\n" + rank1 + "\n",
       "rank 0: 0RESHARD: a rank's action list ends with STEP, the optimizer step"},
      // dp·cp = 8 and one stage never reduces its gradients: the replicas would drift apart.
      {rank0 + "\n" + without(rank1, "1REDUCE_GRAD") + "\n",
       "rank 1: 1REDUCE_GRAD: appears 0 times; with dp·cp = 8"},
      // ZeRO-3 and a stage computing without gathering its parameters.
      {without(rank0, "0UNSHARD") + "\n" + rank1 + "\n",
       "rank 0: 0F0: runs without its parameters"},
  };
  for (const Case& each : cases) {
    write("llama8b-schedule.csv", each.rows);
    std::vector<std::string> refusals;
    for (const std::string& command :
         {"validate " + plan, "simulate --plan " + plan, "schedule --plan " + plan}) {
      const CommandResult run = strata(command);
      EXPECT_EQ(run.exit_code, 1) << command << "\n" << each.rows << run.err;
      EXPECT_EQ(lines(run.err), 1u) << command << ": " << run.err;
      EXPECT_THAT(run.err, HasSubstr("llama8b-schedule.csv: " + each.expected)) << command;
      refusals.push_back(run.err);
    }
    EXPECT_EQ(refusals[0], refusals[1]);
    EXPECT_EQ(refusals[0], refusals[2]);
  }
}

TEST_F(HardeningCli, NothingFitsSaysHowManyGpusWouldHoldTheModel) {
  const CommandResult run = strata("plan --model gpt3-1t --cluster dgx-h100:1 --quiet");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(lines(run.err), 1u);
  EXPECT_THAT(run.err, HasSubstr("at least 225 H100-SXM5-80GB GPUs (29 nodes of 8) would hold"));
}

// Outputs that are not regular files (third round of adversarial inputs): every atomic writer
// renames a new file over its path, which would replace a symbolic link, a FIFO or a device node
// (as root, --out /dev/stdout replaced the system's). Refused, naming the path, the node left as
// it was, nothing written.
TEST_F(HardeningCli, OutputsThatAreNotRegularFilesAreRefusedAndLeftAlone) {
  const fs::path target = write("target.txt", "keep me\n");
  const fs::path link = directory / "link.json";
  fs::create_symlink(target, link);
  const fs::path null_link = directory / "null.json";
  fs::create_symlink("/dev/null", null_link);
  const fs::path fifo = directory / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string plan =
      "plan --model gpt-tiny --cluster cpu-local:2 --global-batch 8 "
      "--seq-len 64 --top 1 --quiet --out ";
  for (const auto& [path, kind] :
       {std::pair{link, "a symbolic link"}, {null_link, "a symbolic link"}, {fifo, "a FIFO"}}) {
    expect_refused(strata(plan + path.string()), 1,
                   path.string() + ": is " + kind + ": strata writes regular files only");
    expect_refused(
        strata("train --model gpt-tiny --data missing.bin --write-plan " + path.string()), 1,
        path.string() + ": is " + kind);
    expect_refused(
        strata("report --plan " + (kFixtures / "plan/valid/gpt2-cpu-tp2-pp2.json").string() +
               " --out " + path.string()),
        1, path.string() + ": is " + kind);
  }
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(target), "keep me\n");
  EXPECT_TRUE(fs::is_symlink(null_link));
  EXPECT_TRUE(fs::is_fifo(fifo));
  // Written at the end of a run: checked before the first step.
  expect_refused(strata("train --model gpt-tiny --data missing.bin --save-llmc " + link.string()),
                 1, "--save-llmc: " + link.string() + " is a symbolic link");
}

struct HardeningTrainCli : HardeningCli {
  void SetUp() override {
    HardeningCli::SetUp();
    if (!fs::exists(kText)) GTEST_SKIP() << kText << " is not installed";
    tokens = (directory / "gpl.bin").string();
    ASSERT_EQ(strata("data --text " + kText + " --out " + tokens).exit_code, 0);
  }
  std::string train(const std::string& extra) const {
    return "train --model gpt-tiny --data " + tokens + " --micro-batch 2 --global-batch 2 " +
           "--seq-len 32 " + extra;
  }
  static inline const std::string kText = "/usr/share/common-licenses/GPL-3";
  std::string tokens;
};

// A planted lock that links elsewhere is refused, its target untouched; a stray temporary whose
// writer's process id no process can have is left alone, not an internal error.
TEST_F(HardeningTrainCli, CheckpointDirectoriesHoldOnlyWhatStrataMadeThere) {
  const fs::path planted = directory / "planted";
  fs::create_directories(planted);
  const fs::path victim = write("victim.txt", "precious\n");
  fs::create_symlink(victim, planted / ".strata-lock");
  expect_refused(strata(train("--steps 1 --checkpoint-dir " + planted.string())), 1,
                 (planted / ".strata-lock").string() + ": is a symbolic link");
  EXPECT_EQ(slurp(victim), "precious\n");

  const fs::path stray = directory / "stray";
  fs::create_directories(stray / ".step_00000001.tmp.99999999999999999999");
  const CommandResult run = strata(train("--steps 1 --checkpoint-dir " + stray.string()));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::exists(stray / "step_00000001" / "state.json"));
  EXPECT_TRUE(fs::exists(stray / ".step_00000001.tmp.99999999999999999999"));
}

// pp 1 with two chunks on one process passes each micro-batch from its chunk 0 to its chunk 1
// through its own pipeline group, as `mpirun -np 1` does: the one-chunk run's losses.
TEST_F(HardeningTrainCli, VirtualStagesOnOneProcessTrainAsOneChunkDoes) {
  const CommandResult one = strata(train("--steps 3 --log-format json"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult chunks = strata(train("--steps 3 --vpp 2 --log-format json"));
  ASSERT_EQ(chunks.exit_code, 0) << chunks.err;
  const auto losses = [](const std::string& out) {
    std::vector<double> found;
    for (const nlohmann::json& record : strata::testing::step_records(out)) {
      found.push_back(record.at("loss").get<double>());
    }
    return found;
  };
  const std::vector<double> expected = losses(one.out), got = losses(chunks.out);
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
}

// A run whose loss stops being finite stops at that step, with one line, and writes nothing of
// it: no checkpoint of NaN weights, no llm.c file.
TEST_F(HardeningTrainCli, ADivergingRunStopsAtItsFirstNonFiniteLossWritingNothing) {
  const fs::path checkpoints = directory / "checkpoints";
  const fs::path weights = directory / "weights.llmc";
  const CommandResult run =
      strata(train("--steps 200 --lr 1000 --grad-clip 0 --log-format json --checkpoint-dir " +
                   checkpoints.string() + " --save-llmc " + weights.string()));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(lines(run.err), 1u) << run.err;
  EXPECT_THAT(run.err, StartsWith("strata: training diverged: the loss is "));
  const std::vector<nlohmann::json> steps = strata::testing::step_records(run.out);
  ASSERT_FALSE(steps.empty());
  ASSERT_LT(steps.size(), 200u) << "the loss never diverged: the case needs a larger rate";
  for (std::size_t i = 0; i + 1 < steps.size(); ++i) {
    EXPECT_TRUE(steps[i].at("loss").is_number()) << "a non-finite loss before the last step";
  }
  EXPECT_FALSE(fs::exists(weights));
  EXPECT_TRUE(!fs::exists(checkpoints) || fs::is_empty(checkpoints) ||
              (fs::directory_iterator(checkpoints)->path().filename() == ".strata-lock" &&
               std::distance(fs::directory_iterator(checkpoints), fs::directory_iterator()) == 1));
}

// The model a --model flag names is the file the error names (it said "command line").
// The CUDA backend's gaps (a query/key norm has no kernel there yet) are named in the model
// file, before any GPU is looked for.
TEST_F(HardeningTrainCli, WhatTheExecutorCannotBuildIsNamedInTheModelFile) {
  nlohmann::json model =
      nlohmann::json::parse(slurp(STRATA_SOURCE_DIR "/schemas/presets/models/llama-tiny.json"));
  model.erase("$schema");
  model["qk_norm"] = true;
  const fs::path file = write("qk-norm.json", model.dump());
  expect_refused(strata("train --model " + file.string() + " --data " + tokens + " --device cuda"),
                 1,
                 file.string() +
                     ": /qk_norm: the CUDA backend has no kernels for query/key norms "
                     "yet");
}

// Two phases of 2^40 steps: the plan set would count 2^41, above what strata reads back. Refused
// where the phases are read, not written and then refused.
TEST_F(HardeningCli, PhasesLongerThanARunCanBeAreRefusedBeforeAnyPlanIsWritten) {
  const fs::path phases = write("phases.json", R"({"schema_version": 1, "kind": "phases",
    "phases": [{"steps": 1099511627776, "global_batch_size": 8, "seq_length": 64},
               {"steps": 1099511627776, "global_batch_size": 16, "seq_length": 64}]})");
  const fs::path out = directory / "set.json";
  expect_refused(strata("plan --model gpt-tiny --cluster cpu-local:2 --quiet --phases " +
                        phases.string() + " --out " + out.string()),
                 1, phases.string() + ": /phases/1/steps: 1099511627776: the phases would last");
  EXPECT_FALSE(fs::exists(out));
}

// The simulator's work grows with the square of the pipeline's stages: a 4,096-layer model at
// pp 4,096 (45 GB before) is refused at once with the limit; 512 stages simulate.
TEST_F(HardeningCli, PipelinesDeeperThanTheSimulatorsLimitAreRefusedAtOnce) {
  nlohmann::json model =
      nlohmann::json::parse(slurp(STRATA_SOURCE_DIR "/schemas/presets/models/gpt-tiny.json"));
  model.erase("$schema");
  model["num_layers"] = 4096;
  model["name"] = "deep";
  const fs::path file = write("deep.json", model.dump());
  const auto started = std::chrono::steady_clock::now();
  expect_refused(
      strata("simulate --model " + file.string() +
             " --cluster dgx-h100:512 --pp 4096 --dp 1 --global-batch 4096 --seq-len 64"),
      1, "/mesh/pp: pp × vpp = 4096 × 1 = 4096 pipeline stages: strata simulates at most 512");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  const CommandResult deepest = strata("simulate --model " + file.string() +
                                       " --cluster dgx-h100:64 --pp 512 --dp 1 --global-batch "
                                       "512 --seq-len 64");
  EXPECT_EQ(deepest.exit_code, 0) << deepest.err;
}

}  // namespace
}  // namespace strata::tools
