// `mpirun -np W strata train` switching layouts as users run it: in memory at chosen steps, from a
// sequence too long for the first layout into context parallelism, through a plan set's phases,
// through a run that `strata plan --phases` planned, and between the planner's strategies. Each
// logs the one-rank run's losses. Whole runs: not under the sanitizers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "parallel_cli.h"
#include "strata_under_mpirun.h"
#include "train_log_records.h"

namespace strata::tools {
namespace {

using strata::testing::CommandResult;
using strata::testing::expect_same_losses;
using strata::testing::kMicroModel;
using strata::testing::ParallelCli;
using strata::testing::slurp;
using strata::testing::step_records;
using strata::testing::strata;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// --switch: a tp 2 · dp 2 run that continues on dp 4 at ZeRO-1 after step 2 and on a pipeline
// of 2 × dp 2 after step 4, its state moved between the layouts in memory, logs the one-rank
// run's losses; the summary says what each switch moved. A plan of another model, or a step
// outside the run, is refused with the flag or the file.
TEST_F(ParallelCli, SwitchingLayoutInMemoryLogsTheSingleRankLosses) {
  const CommandResult one = strata(train("--steps 6 --log-format json"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  ASSERT_EQ(expected.size(), 6u) << one.out;
  // The plans to switch to, as --write-plan writes them (each after a step of its own).
  const auto write_plan = [&](const std::string& name, const std::string& layout) {
    const fs::path plan = directory / (name + ".json");
    const CommandResult written = mpirun(4, "train --model " + kMicroModel + " --data " + tokens +
                                                " --global-batch 4 --seq-len 32 --steps 1 " +
                                                layout + " --write-plan " + plan.string());
    EXPECT_EQ(written.exit_code, 0) << written.err;
    return plan.string();
  };
  const std::string data_parallel = write_plan("dp4", "--micro-batch 1 --dp 4 --zero 1");
  const std::string pipelined = write_plan("pp2", "--micro-batch 1 --dp 2 --pp 2");
  const CommandResult switched =
      mpirun(4, train("--tp 2 --dp 2 --sequence-parallel --steps 6 --log-format json --switch 2:" +
                      data_parallel + ",4:" + pipelined));
  ASSERT_EQ(switched.exit_code, 0) << switched.err;
  const std::vector<nlohmann::json> got = step_records(switched.out);
  ASSERT_EQ(got.size(), 6u) << switched.out;
  expect_same_losses(got, expected);
  const nlohmann::json summary = nlohmann::json::parse(
      switched.out.substr(switched.out.rfind('\n', switched.out.size() - 2) + 1));
  ASSERT_TRUE(summary.contains("switches")) << switched.out;
  ASSERT_EQ(summary.at("switches").size(), 2u);
  EXPECT_EQ(summary.at("switches").at(0).at("step"), 2);
  EXPECT_EQ(summary.at("switches").at(0).at("to"), data_parallel);
  EXPECT_GT(summary.at("switches").at(0).at("most_sent_bytes").get<double>(), 0);
  // Beside it, the transfer's prediction from the same plan of pieces.
  EXPECT_GT(summary.at("switches").at(0).at("predicted_transfer_s").get<double>(), 0);
  EXPECT_EQ(summary.at("switches").at(1).at("from"), data_parallel);

  const CommandResult outside = strata(train("--steps 6 --switch 6:" + data_parallel));
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_THAT(outside.err, HasSubstr("--switch: 6:" + data_parallel +
                                     ": step 6 is not inside the run (1 to 5)"));
  const fs::path other_model = directory / "other.json";
  nlohmann::json document = nlohmann::json::parse(slurp(data_parallel));
  document["model"]["norm_epsilon"] = 1e-3;  // another model, as valid as the first
  document.erase("content_hash");
  std::ofstream(other_model) << document.dump();
  const CommandResult another = mpirun(
      4, train("--tp 2 --dp 2 --sequence-parallel --steps 6 --switch 2:" + other_model.string()));
  EXPECT_NE(another.exit_code, 0);
  EXPECT_THAT(another.err, HasSubstr(other_model.string() + ": /model:"));
}

// A context extension as a switch: sequences of 32 tokens on tp 2 · dp 2, then of 64 on
// cp 2 · dp 2 from step 3 — the same losses as one rank switching to sequences of 64 there.
TEST_F(ParallelCli, ASwitchCanLengthenTheSequencesIntoContextParallelism) {
  const std::string model =
      "train --model " + kMicroModel + " --data " + tokens + " --global-batch 4 --micro-batch 2 ";
  const fs::path one_long = directory / "one-64.json";
  const fs::path context_long = directory / "cp2-64.json";
  ASSERT_EQ(strata(model + "--seq-len 64 --steps 1 --write-plan " + one_long.string()).exit_code,
            0);
  ASSERT_EQ(mpirun(4, model + "--seq-len 64 --cp 2 --dp 2 --steps 1 --write-plan " +
                          context_long.string())
                .exit_code,
            0);
  const CommandResult one =
      strata(model + "--seq-len 32 --steps 6 --log-format json --switch 3:" + one_long.string());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  const CommandResult switched =
      mpirun(4, model +
                    "--seq-len 32 --tp 2 --dp 2 --sequence-parallel --steps 6 "
                    "--log-format json --switch 3:" +
                    context_long.string());
  ASSERT_EQ(switched.exit_code, 0) << switched.err;
  const std::vector<nlohmann::json> got = step_records(switched.out);
  ASSERT_EQ(got.size(), 6u) << switched.out;
  ASSERT_EQ(expected.size(), 6u) << one.out;
  expect_same_losses(got, expected);
  // Longer sequences from step 4 on: the loss of a step of 64-token sequences differs from the
  // run that stayed at 32 (the switch changed what trains, not only where).
  const CommandResult unswitched = strata(model + "--seq-len 32 --steps 6 --log-format json");
  ASSERT_EQ(unswitched.exit_code, 0) << unswitched.err;
  EXPECT_NE(step_records(unswitched.out)[3].at("loss"), expected[3].at("loss"));
}

// A plan set's phases (tests/fixtures/plan_set/valid: tp 2 · dp 2, dp 4 at ZeRO-1 from step 2,
// pp 2 · dp 2 from step 4) train as one run with the one-rank losses; --switch picks the set's
// plans by id instead, and an id the set lacks is refused naming the ones it has.
TEST_F(ParallelCli, APlanSetsPhasesSwitchInMemoryWithTheSingleRankLosses) {
  const std::string set =
      std::string(STRATA_FIXTURES_DIR) + "/plan_set/valid/gpt-micro-phases.json";
  const CommandResult one = strata(train("--steps 6 --log-format json"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  const auto expect_single_rank_losses = [&](const CommandResult& run, const std::string& what,
                                             std::size_t switches) {
    ASSERT_EQ(run.exit_code, 0) << what << ": " << run.err;
    const std::vector<nlohmann::json> got = step_records(run.out);
    ASSERT_EQ(got.size(), expected.size()) << what << ": " << run.out;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double loss = expected[i].at("loss").get<double>();
      EXPECT_NEAR(got[i].at("loss").get<double>(), loss, 1e-5 * std::abs(loss))
          << what << ", step " << i + 1;
    }
    const nlohmann::json summary =
        nlohmann::json::parse(run.out.substr(run.out.rfind('\n', run.out.size() - 2) + 1));
    ASSERT_EQ(summary.value("switches", nlohmann::json::array()).size(), switches) << run.out;
  };
  const std::string data = " --data " + tokens + " --steps 6 --log-format json";
  const CommandResult phases = mpirun(4, "train --plan-set " + set + data);
  expect_single_rank_losses(phases, "phases", 2);
  EXPECT_THAT(phases.out, HasSubstr("\"to\":\"" + set + "#dp4\""));
  expect_single_rank_losses(mpirun(4, "train --plan-set " + set + data + " --switch 3:pp2"),
                            "--switch 3:pp2", 1);
  const CommandResult unknown = mpirun(4, "train --plan-set " + set + data + " --switch 3:tp8");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("--switch: 3:tp8: \"tp8\" is not a plan of " + set +
                                     " (tp2dp2, dp4, pp2)"));
}

// Issue 34's phased run: `strata plan --phases` (64-token sequences at a batch of 8, then 256 at
// a batch of 1) plans context parallelism for the long phase; its plan set trains under mpirun
// with the losses of one rank switching to 256-token sequences at the same step, the switch is
// logged beside its prediction, and the trace holds it after the traced step.
TEST_F(ParallelCli, APhasedRunPlannedByStrataPlanTrainsWithTheSingleRankLosses) {
  const std::string phases =
      std::string(STRATA_FIXTURES_DIR) + "/phases/valid/context-extension.json";
  const std::string set = (directory / "set.json").string();
  const CommandResult planned = strata("plan --model gpt-tiny --cluster cpu-local:4 --phases " +
                                       phases + " --format json --out " + set);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json report = nlohmann::json::parse(planned.out);
  const nlohmann::json& plans = report.at("plan_set").at("plans");
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_GT(plans[1].at("plan").at("mesh").at("cp").get<int>(), 1) << planned.out;
  // The run's predicted time counts the switch between the phases' layouts.
  const nlohmann::json& long_phase = report.at("phases")[1];
  EXPECT_DOUBLE_EQ(report.at("total_seconds").get<double>(),
                   report.at("phases")[0].at("steps_seconds").get<double>() +
                       long_phase.at("switch_in").at("seconds").get<double>() +
                       long_phase.at("steps_seconds").get<double>());

  const std::string long_plan = (directory / "one-256.json").string();
  ASSERT_EQ(
      strata("train --model gpt-tiny --data " + tokens +
             " --global-batch 1 --micro-batch 1 --seq-len 256 --steps 1 --write-plan " + long_plan)
          .exit_code,
      0);
  const CommandResult one =
      strata("train --model gpt-tiny --data " + tokens +
             " --global-batch 8 --seq-len 64 --steps 4 --log-format json --switch 2:" + long_plan);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  const std::string trace = (directory / "trace.json").string();
  const CommandResult phased = mpirun(4, "train --plan-set " + set + " --data " + tokens +
                                             " --steps 4 --log-format json --trace " + trace);
  ASSERT_EQ(phased.exit_code, 0) << phased.err;
  const std::vector<nlohmann::json> got = step_records(phased.out);
  ASSERT_EQ(got.size(), 4u) << phased.out;
  ASSERT_EQ(expected.size(), 4u) << one.out;
  expect_same_losses(got, expected);
  EXPECT_THAT(phased.out, HasSubstr("\"to\":\"" + set + "#long\""));
  EXPECT_THAT(phased.out, HasSubstr("\"predicted_transfer_s\""));
  const nlohmann::json events = nlohmann::json::parse(slurp(trace)).at("traceEvents");
  int measured = 0, predicted = 0;
  std::set<int> switch_processes;
  for (const nlohmann::json& event : events) {
    if (event.value("name", "").starts_with("SWITCH " + set + "#short -> " + set + "#long")) {
      switch_processes.insert(event.at("pid").get<int>());
      ++measured;
    }
    if (event.value("name", "") == "process_name" &&
        event.at("args").at("name") == "predicted: layout switches") {
      predicted = event.at("pid").get<int>();
    }
  }
  EXPECT_EQ(measured, 5);  // every rank, and the prediction beside them
  EXPECT_TRUE(switch_processes.contains(predicted));
}

// Hetu's use of several strategies, from the planner: `plan --strategies 3` on 4 ranks, then a run
// that moves through all three by id has the losses of one rank (8 ranks cycling five layouts is
// ParallelSwitch in parallel_training_test; 8 processes here took most of the sanitizers' budget).
TEST_F(ParallelCli, StrategiesFromThePlannerSwitchByIdWithTheSingleRankLosses) {
  const std::string set = (directory / "strategies.json").string();
  const CommandResult planned = strata(
      "plan --model gpt-tiny --cluster cpu-local:4 --global-batch 8 --seq-len 64 "
      "--strategies 3 --format json --out " +
      set);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json report = nlohmann::json::parse(planned.out);
  const nlohmann::json& plans = report.at("plan_set").at("plans");
  ASSERT_EQ(plans.size(), 3u);
  const std::string switches =
      "1:" + plans[1].at("id").get<std::string>() + ",2:" + plans[2].at("id").get<std::string>();
  const CommandResult one = strata("train --model gpt-tiny --data " + tokens +
                                   " --global-batch 8 --seq-len 64 --steps 3 --log-format json");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  const CommandResult cycled = mpirun(4, "train --plan-set " + set + " --data " + tokens +
                                             " --steps 3 --log-format json --switch " + switches);
  ASSERT_EQ(cycled.exit_code, 0) << cycled.err;
  const std::vector<nlohmann::json> got = step_records(cycled.out);
  ASSERT_EQ(got.size(), 3u) << cycled.out;
  expect_same_losses(got, expected);
  // Another mesh than the first's moves state: not every switch is a regrouping of one placement.
  const nlohmann::json summary =
      nlohmann::json::parse(cycled.out.substr(cycled.out.rfind('\n', cycled.out.size() - 2) + 1));
  ASSERT_EQ(summary.at("switches").size(), 2u) << cycled.out;
  EXPECT_GT(summary.at("switches")[0].at("most_received_bytes").get<double>() +
                summary.at("switches")[1].at("most_received_bytes").get<double>(),
            0);
}

}  // namespace
}  // namespace strata::tools
