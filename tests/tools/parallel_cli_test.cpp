// `mpirun -np W strata train` as users run it: a parallel layout logs the single-rank losses with
// the simulator's prediction beside them, and every way a parallel job can go wrong ends the whole
// job with one line and a non-zero exit — never a hang (each case also has CTest's timeout).
#include "parallel_cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
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
namespace fs = std::filesystem;

using strata::testing::expect_same_losses;
using strata::testing::kMicroModel;
using strata::testing::ParallelCli;

TEST_F(ParallelCli, Tp2Dp2LogsTheSingleRankLossesWithThePredictionBeside) {
  const std::string save_one = (directory / "one.llmc").string();
  const std::string save_four = (directory / "four.llmc").string();
  const CommandResult one = strata(train("--steps 3 --log-format json --save-llmc " + save_one));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult four =
      mpirun(4, train("--tp 2 --dp 2 --sequence-parallel --zero 1 --steps 3 --log-format json "
                      "--save-llmc " +
                      save_four));
  ASSERT_EQ(four.exit_code, 0) << four.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  const std::vector<nlohmann::json> got = step_records(four.out);
  ASSERT_EQ(expected.size(), 3u);
  ASSERT_EQ(got.size(), 3u) << "only rank 0 logs: " << four.out;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double loss = expected[i].at("loss").get<double>();
    EXPECT_NEAR(got[i].at("loss").get<double>(), loss, 1e-5 * std::abs(loss)) << "step " << i + 1;
    // The simulator's prediction for this plan on cpu-local sits beside the measurement.
    EXPECT_GT(got[i].at("predicted_step_time_s").get<double>(), 0);
    EXPECT_NEAR(
        got[i].at("measured_over_predicted").get<double>(),
        got[i].at("step_time_s").get<double>() / got[i].at("predicted_step_time_s").get<double>(),
        1e-6);
    EXPECT_GT(got[i].at("peak_host_bytes").get<double>(), 0);
    // The model's memory: the resident set's growth since before the model was built, a part of
    // the peak (the process's own baseline is the rest), on one rank and on four.
    for (const nlohmann::json* record : {&expected[i], &got[i]}) {
      EXPECT_GT(record->at("peak_model_host_bytes").get<double>(), 0);
      EXPECT_LT(record->at("peak_model_host_bytes").get<double>(),
                record->at("peak_host_bytes").get<double>());
    }
    // tp and dp collectives ran, and the time blocked in them was measured.
    EXPECT_GT(got[i].at("communication_s").get<double>(), 0);
    EXPECT_LT(got[i].at("communication_s").get<double>(), got[i].at("step_time_s").get<double>());
  }
  // --save-llmc gathers the shards: the same file as the one-rank run, within float rounding.
  const std::string a = slurp(save_one), b = slurp(save_four);
  ASSERT_EQ(a.size(), b.size());
  constexpr std::size_t kHeaderBytes = 256 * sizeof(std::int32_t);
  ASSERT_EQ(a.compare(0, kHeaderBytes, b, 0, kHeaderBytes), 0) << "headers differ";
  const auto* x = reinterpret_cast<const float*>(a.data() + kHeaderBytes);
  const auto* y = reinterpret_cast<const float*>(b.data() + kHeaderBytes);
  float worst = 0;
  for (std::size_t i = 0; i < (a.size() - kHeaderBytes) / sizeof(float); ++i) {
    worst = std::max(worst, std::abs(x[i] - y[i]));
  }
  EXPECT_LE(worst, 1e-5f);
}

TEST_F(ParallelCli, ContextParallelismLogsTheSingleRankLossesWithThePredictionBeside) {
  const CommandResult one = strata(train("--steps 3 --log-format json"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult two = mpirun(2, train("--cp 2 --zero 1 --steps 3 --log-format json"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  const std::vector<nlohmann::json> got = step_records(two.out);
  ASSERT_EQ(expected.size(), 3u);
  ASSERT_EQ(got.size(), 3u) << two.out;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double loss = expected[i].at("loss").get<double>();
    EXPECT_NEAR(got[i].at("loss").get<double>(), loss, 1e-5 * std::abs(loss)) << "step " << i + 1;
    // The simulator prices the ring beside the measurement; the ring's transfers are measured.
    EXPECT_GT(got[i].at("predicted_step_time_s").get<double>(), 0);
    EXPECT_GT(got[i].at("communication_s").get<double>(), 0);
  }
  // Llama 3's all-gather variant: the same losses, and a prediction priced by its own
  // collectives rather than the ring's.
  const CommandResult gathered =
      mpirun(2, train("--cp 2 --cp-comm all_gather --zero 1 --steps 3 --log-format json"));
  ASSERT_EQ(gathered.exit_code, 0) << gathered.err;
  const std::vector<nlohmann::json> gathered_steps = step_records(gathered.out);
  ASSERT_EQ(gathered_steps.size(), 3u) << gathered.out;
  for (std::size_t i = 0; i < gathered_steps.size(); ++i) {
    const double loss = expected[i].at("loss").get<double>();
    EXPECT_NEAR(gathered_steps[i].at("loss").get<double>(), loss, 1e-5 * std::abs(loss))
        << "step " << i + 1;
    EXPECT_NE(gathered_steps[i].at("predicted_step_time_s").get<double>(),
              got[i].at("predicted_step_time_s").get<double>());
  }
}

TEST_F(ParallelCli, HybridShardingLogsTheSingleRankLosses) {
  // dp 4 of one sequence each: the same 4-sequence global batch as the one-rank run.
  const std::string batch = "train --model " + kMicroModel + " --data " + tokens +
                            " --micro-batch 1 --global-batch 4 --seq-len 32 --steps 3 "
                            "--log-format json ";
  const CommandResult one = strata(batch);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult four = mpirun(4, batch + "--dp 4 --dp-shard 2 --zero 3");
  ASSERT_EQ(four.exit_code, 0) << four.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  const std::vector<nlohmann::json> got = step_records(four.out);
  ASSERT_EQ(got.size(), 3u) << four.out;
  expect_same_losses(got, expected);
  // Sharding without ZeRO is refused with the plan field and the rule.
  const CommandResult unsharded = mpirun(4, batch + "--dp 4 --dp-shard 2");
  EXPECT_NE(unsharded.exit_code, 0);
  EXPECT_THAT(strata_lines(unsharded.err),
              ::testing::ElementsAre(HasSubstr("/mesh/dp_shard: 2 < dp=4 shards model state, "
                                               "but ZeRO-0 shards none")));
}

TEST_F(ParallelCli, AWorldSizeThePlanDoesNotHaveEndsEveryRankWithOneLine) {
  const CommandResult run = mpirun(3, train("--tp 2 --dp 2 --steps 2"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(strata_lines(run.err),
              ::testing::ElementsAre(HasSubstr("the plan runs on 4 ranks (tp 2")));
  EXPECT_THAT(run.err, HasSubstr("this job has 3"));
  EXPECT_EQ(run.out, "");
}

TEST_F(ParallelCli, APipelineLogsTheSingleRankLosses) {
  const CommandResult one = strata(train("--steps 3 --log-format json"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CommandResult two = mpirun(2, train("--pp 2 --schedule zb-h1 --steps 3 --log-format json"));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.err, "");
  const std::vector<nlohmann::json> expected = step_records(one.out);
  const std::vector<nlohmann::json> got = step_records(two.out);
  ASSERT_EQ(got.size(), 3u) << two.out;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double loss = expected[i].at("loss").get<double>();
    EXPECT_NEAR(got[i].at("loss").get<double>(), loss, 1e-5 * std::abs(loss)) << "step " << i + 1;
    EXPECT_GT(got[i].at("predicted_step_time_s").get<double>(), 0);
  }
}

// The trace's process names and, per process, the actions it ran (Chrome trace "X" events).
std::map<std::string, std::vector<std::string>> traced_actions(const std::string& file) {
  const nlohmann::json trace = nlohmann::json::parse(slurp(file));
  std::map<int, std::string> names;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "M" && event.at("name") == "process_name") {
      names[event.at("pid").get<int>()] = event.at("args").at("name").get<std::string>();
    }
  }
  std::map<std::string, std::vector<std::string>> actions;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    EXPECT_GE(event.at("dur").get<double>(), 0);
    actions[names.at(event.at("pid").get<int>())].push_back(event.at("name").get<std::string>());
  }
  return actions;
}

TEST_F(ParallelCli, ATraceHoldsEveryRanksActionsBesideThePrediction) {
  const std::string file = (directory / "trace.json").string();
  const CommandResult run =
      mpirun(2, train("--pp 2 --steps 2 --trace-step 2 --log-format json --trace " + file));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::map<std::string, std::vector<std::string>> actions = traced_actions(file);
  // Rank 0 holds stage 0: its 2 forwards and backwards, sends, the tie and the step, as its
  // action list says; the prediction's two pipeline ranks are beside them.
  const std::vector<std::string>& first = actions.at("measured: rank 0 (tp 0, dp 0, pp 0)");
  EXPECT_EQ(std::count(first.begin(), first.end(), "0F1"), 1);
  EXPECT_EQ(std::count(first.begin(), first.end(), "0B1"), 1);
  EXPECT_EQ(std::count(first.begin(), first.end(), "0SEND_F1"), 1);
  EXPECT_EQ(std::count(first.begin(), first.end(), "0TIED_GRAD"), 1);
  EXPECT_EQ(first.back(), "STEP");
  const std::vector<std::string>& last = actions.at("measured: rank 1 (tp 0, dp 0, pp 1)");
  EXPECT_EQ(std::count(last.begin(), last.end(), "1RECV_F0"), 1);
  EXPECT_TRUE(actions.contains("predicted: pipeline rank 0"));
  EXPECT_TRUE(actions.contains("predicted: pipeline rank 1"));
  // The JSON log's trace line compares each action type on rank 0.
  nlohmann::json summary;
  std::istringstream lines(run.out);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("trace")) summary = record;
  }
  ASSERT_FALSE(summary.is_null()) << run.out;
  EXPECT_EQ(summary.at("traced_step"), 2);
  bool forward_seen = false;
  for (const nlohmann::json& entry : summary.at("actions")) {
    if (entry.at("type") != "F") continue;
    forward_seen = true;
    EXPECT_EQ(entry.at("measured_count"), 2);
    EXPECT_EQ(entry.at("predicted_count"), 2);
    EXPECT_GT(entry.at("measured_mean_s").get<double>(), 0);
    EXPECT_GT(entry.at("predicted_mean_s").get<double>(), 0);
  }
  EXPECT_TRUE(forward_seen);
}

TEST_F(ParallelCli, ATraceOfAOneRankRunSplitsEachMicroBatch) {
  const std::string file = (directory / "trace.json").string();
  const CommandResult run = strata(train("--steps 1 --trace " + file));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_THAT(run.out, HasSubstr("trace of step 1 written to"));
  const std::vector<std::string> expected{"0F0", "0B0", "0F1", "0B1", "STEP"};
  EXPECT_EQ(traced_actions(file).at("measured: rank 0 (tp 0, dp 0, pp 0)"), expected);
}

TEST_F(ParallelCli, AReshardedCheckpointContinuesOnAnotherLayout) {
  // 4 steps on one device, checkpointed at 2; the step-2 checkpoint resharded for dp2 ZeRO-1 and
  // resumed under mpirun: steps 3 and 4 are the one-device run's.
  const fs::path one = directory / "one";
  const CommandResult first = strata(
      train("--steps 4 --checkpoint-every 2 --log-format json --checkpoint-dir " + one.string()));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const fs::path plan = directory / "dp2.json";
  ASSERT_EQ(mpirun(2, train("--dp 2 --zero 1 --steps 1 --write-plan " + plan.string())).exit_code,
            0);
  const fs::path two = directory / "two";
  const CommandResult reshard = strata("reshard --from " + (one / "step_00000002").string() +
                                       " --to-plan " + plan.string() + " --out " + two.string());
  ASSERT_EQ(reshard.exit_code, 0) << reshard.err;
  EXPECT_EQ(reshard.err, "");
  const CommandResult resumed =
      mpirun(2, "train --plan " + plan.string() + " --data " + tokens +
                    " --steps 4 --resume --log-format json --checkpoint-dir " + two.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::vector<nlohmann::json> expected = step_records(first.out);
  const std::vector<nlohmann::json> got = step_records(resumed.out);
  ASSERT_EQ(got.size(), 2u) << resumed.out;
  for (std::size_t i = 0; i < 2; ++i) {
    const double loss = expected[2 + i].at("loss").get<double>();
    EXPECT_NEAR(got[i].at("loss").get<double>(), loss, 1e-5 * std::abs(loss)) << "step " << i + 3;
  }
  // A corrupted source file is refused with one line naming it; nothing is written.
  {
    std::fstream file(one / "step_00000004" / "model.bin",
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x5a');
  }
  const CommandResult corrupted =
      strata("reshard --from " + (one / "step_00000004").string() + " --to-plan " + plan.string() +
             " --out " + (directory / "three").string());
  EXPECT_EQ(corrupted.exit_code, 1);
  EXPECT_THAT(corrupted.err, HasSubstr("model.bin"));
  EXPECT_THAT(corrupted.err, HasSubstr("CRC-32"));
  EXPECT_EQ(strata_lines(corrupted.err).size(), 1u) << corrupted.err;
  EXPECT_FALSE(fs::exists(directory / "three" / "step_00000004"));
}

TEST_F(ParallelCli, AResumeOnAnotherPlanReshardsOnLoad) {
  // 4 steps on pp2, checkpointed at 2. The step-2 checkpoint, copied as it is, resumes on tp2 and
  // on one device with no reshard step: steps 3 and 4 are the pp2 run's, and the summary names
  // the change of layout.
  const fs::path pipelined = directory / "pp2";
  const CommandResult first =
      mpirun(2, train("--pp 2 --steps 4 --checkpoint-every 2 --log-format json --checkpoint-dir " +
                      pipelined.string()));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::vector<nlohmann::json> expected = step_records(first.out);
  ASSERT_EQ(expected.size(), 4u) << first.out;
  const auto copy_of_step2 = [&](const std::string& name) {
    const fs::path copy = directory / name;
    fs::create_directories(copy);
    fs::copy(pipelined / "step_00000002", copy / "step_00000002", fs::copy_options::recursive);
    return copy;
  };
  const auto expect_steps_3_and_4 = [&](const CommandResult& run, const std::string& layout) {
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err, "");
    const std::vector<nlohmann::json> got = step_records(run.out);
    ASSERT_EQ(got.size(), 2u) << run.out;
    for (std::size_t i = 0; i < 2; ++i) {
      const double loss = expected[2 + i].at("loss").get<double>();
      EXPECT_NEAR(got[i].at("loss").get<double>(), loss, 1e-5 * std::abs(loss))
          << layout << ", step " << i + 3;
    }
    const nlohmann::json summary =
        nlohmann::json::parse(run.out.substr(run.out.rfind('\n', run.out.size() - 2) + 1));
    ASSERT_TRUE(summary.contains("resume_changes")) << run.out;
    EXPECT_THAT(summary.at("resume_changes").at(0).get<std::string>(),
                HasSubstr("pp 2 (tp-cp-dp-pp), ZeRO-0, buckets of"));
    EXPECT_THAT(summary.at("resume_changes").at(0).get<std::string>(), HasSubstr(layout));
  };
  const fs::path tensor_parallel = copy_of_step2("tp2");
  expect_steps_3_and_4(
      mpirun(2, train("--tp 2 --steps 4 --resume --log-format json --checkpoint-dir " +
                      tensor_parallel.string())),
      "→ tp 2 · cp 1 · dp 1 · pp 1");
  const fs::path alone = copy_of_step2("one");
  expect_steps_3_and_4(
      strata(train("--steps 4 --resume --log-format json --checkpoint-dir " + alone.string())),
      "→ one device");

  // A truncated source file stops every rank with one line naming it.
  const fs::path truncated = copy_of_step2("truncated");
  const fs::path shard = truncated / "step_00000002" / "model.tp0.pp1.dp0.bin";
  fs::resize_file(shard, fs::file_size(shard) - 4);
  const CommandResult short_file =
      mpirun(2, train("--tp 2 --steps 4 --resume --checkpoint-dir " + truncated.string()));
  EXPECT_NE(short_file.exit_code, 0);
  std::vector<std::string> lines = strata_lines(short_file.err);
  ASSERT_EQ(lines.size(), 1u) << short_file.err;
  EXPECT_THAT(lines[0], HasSubstr("model.tp0.pp1.dp0.bin"));
  EXPECT_THAT(lines[0], HasSubstr("truncated"));
  EXPECT_EQ(short_file.out.find("step 3"), std::string::npos) << short_file.out;

  // Another model's checkpoint is refused naming the field that differs.
  const fs::path other = copy_of_step2("other");
  const CommandResult other_model =
      mpirun(2, "train --model gpt-tiny --data " + tokens +
                    " --micro-batch 2 --global-batch 4 --seq-len 32 --tp 2 --steps 4 --resume "
                    "--checkpoint-dir " +
                    other.string());
  EXPECT_NE(other_model.exit_code, 0);
  lines = strata_lines(other_model.err);
  ASSERT_EQ(lines.size(), 1u) << other_model.err;
  EXPECT_THAT(lines[0], HasSubstr("state.json: /model/"));
}

// A pipeline plan whose schedule is a custom CSV file with these rows.
struct CustomSchedule {
  std::string name, csv, expected;
};
void PrintTo(const CustomSchedule& schedule, std::ostream* out) { *out << schedule.name; }

class ParallelCliCustomSchedule : public ParallelCli,
                                  public ::testing::WithParamInterface<CustomSchedule> {};

TEST_P(ParallelCliCustomSchedule, AScheduleTheRuntimeCannotRunEndsEveryRankWithOneLine) {
  const fs::path plan = directory / "pp2.json";
  const CommandResult written = mpirun(2, train("--pp 2 --steps 1 --write-plan " + plan.string()));
  ASSERT_EQ(written.exit_code, 0) << written.err;
  nlohmann::json document = nlohmann::json::parse(slurp(plan));
  document["schedule"] = {{"type", "custom"}, {"file", "schedule.csv"}};
  document.erase("predicted");
  std::ofstream(plan) << document.dump(2);
  std::ofstream(directory / "schedule.csv") << GetParam().csv;
  const CommandResult run = mpirun(2, "train --plan " + plan.string() + " --data " + tokens);
  EXPECT_NE(run.exit_code, 0);
  const std::vector<std::string> messages = strata_lines(run.err);
  ASSERT_EQ(messages.size(), 1u) << run.err;
  EXPECT_THAT(messages[0], HasSubstr(GetParam().expected));
  EXPECT_EQ(run.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ParallelCliCustomSchedule,
    ::testing::Values(
        // The first stage waits for a gradient the second sends only after its own backward,
        // which waits for a forward the first has not run.
        CustomSchedule{"Deadlock", "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", "deadlock"},
        CustomSchedule{"MissingMicroBatch", "0F0,0F1,0B0,0B1\n1F0,1B0\n", "1F1"},
        // Complete and deadlock-free, but it gathers parameters a ZeRO-0 plan never shards.
        CustomSchedule{"UnshardWithoutZero3",
                       "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0RESHARD,"
                       "0TIED_GRAD,STEP\n"
                       "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1TIED_GRAD,STEP\n",
                       "rank 0: 0UNSHARD: the plan's ZeRO stage 0"}),
    [](const ::testing::TestParamInfo<CustomSchedule>& info) { return info.param.name; });

TEST_F(ParallelCli, APlanThatDoesNotFitTheModelNamesThePathAndTheRule) {
  const std::string plan = (directory / "tp3.json").string();
  ASSERT_EQ(strata(train("--steps 1 --write-plan " + plan)).exit_code, 0);
  nlohmann::json document = nlohmann::json::parse(slurp(plan));
  document["mesh"]["tp"] = 3;
  document["cluster"]["gpus_per_node"] = 3;
  document["cluster"]["network_tiers"].back()["scope_gpus"] = 3;
  document.erase("predicted");
  document.erase("content_hash");  // the cluster was edited
  std::ofstream(plan) << document.dump(2);
  const CommandResult run = mpirun(3, "train --plan " + plan + " --data " + tokens);
  EXPECT_NE(run.exit_code, 0);
  const std::vector<std::string> messages = strata_lines(run.err);
  ASSERT_EQ(messages.size(), 1u) << run.err;
  EXPECT_THAT(messages[0], HasSubstr("/mesh/tp"));
  EXPECT_THAT(messages[0], HasSubstr("does not divide"));
}

TEST_F(ParallelCli, ACheckpointThatCannotBeWrittenStopsTheJobWithTheRanksMessage) {
  // A file where the checkpoint directory should be: the save fails during training, after the
  // agreement phases, so the failing rank prints and aborts the job.
  const fs::path blocker = directory / "not-a-directory";
  std::ofstream(blocker) << "x";
  const CommandResult run = mpirun(
      2, train("--dp 2 --steps 2 --checkpoint-every 1 --checkpoint-dir " + blocker.string()));
  EXPECT_NE(run.exit_code, 0);
  const std::vector<std::string> messages = strata_lines(run.err);
  ASSERT_FALSE(messages.empty()) << run.err;
  EXPECT_THAT(messages[0], HasSubstr("not-a-directory"));
}

// The plan carries the gradient bucket size: what `strata simulate` prices for a plan with a
// non-default size is what `strata train` of that plan reduces — the same count of buckets on
// rank 0, with and without a pipeline (whose tied word embedding is a bucket of its own).
TEST_F(ParallelCli, TheBucketsTrainedAreTheBucketsSimulated) {
  struct Case {
    int ranks;
    std::string layout;
  };
  for (const Case& layout :
       {Case{2, "--dp 2 --zero 1"}, Case{2, "--dp 2 --zero 3"}, Case{4, "--dp 2 --pp 2"}}) {
    const std::string plan = (directory / "bucketed.json").string();
    const CommandResult run = mpirun(layout.ranks, train(layout.layout +
                                                         " --bucket-size 30000 --steps 1 "
                                                         "--log-format json --write-plan " +
                                                         plan));
    ASSERT_EQ(run.exit_code, 0) << layout.layout << ": " << run.err;
    nlohmann::json summary;
    std::istringstream lines(run.out);
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (record.contains("summary")) summary = record;
    }
    ASSERT_TRUE(summary.contains("gradient_buckets")) << layout.layout << ": " << run.out;
    const std::int64_t trained = summary.at("gradient_buckets").get<std::int64_t>();
    EXPECT_GE(trained, 2) << layout.layout;
    EXPECT_EQ(trained, summary.at("predicted_gradient_buckets").get<std::int64_t>())
        << layout.layout;
    EXPECT_EQ(nlohmann::json::parse(slurp(plan)).at("gradient_bucket_elements"), 30000);
    const CommandResult simulated = strata("simulate --plan " + plan + " --format json");
    ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
    EXPECT_EQ(nlohmann::json::parse(simulated.out).at("stages").at(0).at("gradient_buckets"),
              trained)
        << layout.layout;
  }
}

// The ranks sharing a host are admitted together: two ranks of a job that does not fit are
// refused in one line that counts both.
TEST_F(ParallelCli, TheRanksOfAHostAreAdmittedTogether) {
  const CommandResult run = mpirun(2, "train --model gpt2-124m --data " + tokens +
                                          " --micro-batch 256 --global-batch 512 --seq-len 1024 "
                                          "--dp 2 --steps 1");
  EXPECT_EQ(run.exit_code, 1);
  const std::vector<std::string> messages = strata_lines(run.err);
  ASSERT_EQ(messages.size(), 1u) << run.err;
  EXPECT_THAT(messages[0],
              ::testing::StartsWith("strata: --memory-check: this host's 2 rank(s) need "));
  EXPECT_EQ(run.out, "");
}

TEST_F(ParallelCli, KillingOneRankMidStepEndsTheJob) {
  // A long run; once it logs its first step, one rank is killed. mpirun must end the others.
  const fs::path out = directory / "long.out", err = directory / "long.err";
  const std::string marker = (directory / "long-run").string();
  const auto started = std::chrono::steady_clock::now();
  const pid_t launcher = start_long_run("--checkpoint-dir " + marker, out, err);
  ASSERT_GT(launcher, 0);
  const std::vector<pid_t> ranks = strata_processes_with(marker);
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(::kill(ranks.back(), SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(150));
}

// A rank that stops without dying (SIGSTOP: MPI notices nothing) would leave the other waiting in
// its next all-reduce forever. With --stall-timeout 5 the waiting rank ends the job within
// seconds, in one line naming what it waited in, with whom, and during which step.
TEST_F(ParallelCli, ARankStoppedMidRunEndsTheJobAfterTheStallTimeout) {
  const fs::path out = directory / "stall.out", err = directory / "stall.err";
  const std::string marker = (directory / "stalled-run").string();
  const pid_t launcher = start_long_run("--stall-timeout 5 --checkpoint-dir " + marker, out, err);
  ASSERT_GT(launcher, 0);
  const std::vector<pid_t> ranks = strata_processes_with(marker);
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(::kill(ranks.back(), SIGSTOP), 0);
  const auto stopped = std::chrono::steady_clock::now();
  int status = 0;
  pid_t ended = 0;
  while ((ended = ::waitpid(launcher, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - stopped < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  ::kill(ranks.back(), SIGKILL);  // whatever happened, no stopped process outlives the test
  if (ended == 0) {
    ::kill(launcher, SIGKILL);
    ::waitpid(launcher, &status, 0);
  }
  ASSERT_EQ(ended, launcher) << "the job still hung 60 s after a rank stopped";
  EXPECT_LT(waited_s, 40);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  const std::vector<std::string> messages = strata_lines(slurp(err));
  ASSERT_EQ(messages.size(), 1u) << slurp(err);
  EXPECT_THAT(messages[0], ::testing::StartsWith("strata: rank "));
  EXPECT_THAT(messages[0], HasSubstr(": stalled: waited "));
  EXPECT_THAT(messages[0], HasSubstr("with world ranks 0-1 during step "));
  EXPECT_THAT(messages[0], HasSubstr("(--stall-timeout 5 s)"));
}

}  // namespace
}  // namespace strata::tools
