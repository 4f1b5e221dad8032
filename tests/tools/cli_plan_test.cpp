// strata plan as users run it: precisions and gradient dtypes, written plans, phases and
// strategies, what it says when nothing fits or the executor does not run the model, and the rows
// it shows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "fixture_paths.h"
#include "strata_command.h"

namespace strata::tools {
namespace {

using strata::testing::CommandResult;
using strata::testing::fixture;
using strata::testing::lines;
using strata::testing::slurp;
using strata::testing::strata;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Gradients reduced in bf16: simulate says so and holds half the gradient bytes; plan searches with
// them for another stack and exports --grad-reduce-in-bf16, and refuses them for Strata's executor
// (fp32 gradients) or under a precision that does not allow them, each in one line.
TEST(CliPlan, Bf16GradientsAreForStacksThatReduceInThem) {
  const std::string knobs =
      "simulate --model llama3.1-8b --cluster dgx-h100:1 --dp 8 --global-batch 64 --zero 1 "
      "--format json ";
  const CommandResult fp32 = strata(knobs);
  const CommandResult bf16 = strata(knobs + "--gradient-dtype bf16");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  const double wide = nlohmann::json::parse(fp32.out)["stages"][0]["gradients_bytes"].get<double>();
  const double narrow =
      nlohmann::json::parse(bf16.out)["stages"][0]["gradients_bytes"].get<double>();
  EXPECT_DOUBLE_EQ(narrow, wide / 2);
  const CommandResult table = strata(
      "simulate --model llama3.1-8b --cluster dgx-h100:1 --dp 8 --global-batch 64 "
      "--gradient-dtype bf16");
  EXPECT_THAT(table.out, HasSubstr("bf16 with bf16 gradients"));

  const std::string plan = "plan --model llama3.1-8b --cluster dgx-h100 --global-batch 64 ";
  const CommandResult nemo =
      strata(plan + "--framework nemo --gradient-dtype bf16 --top 1 --emit megatron");
  ASSERT_EQ(nemo.exit_code, 0) << nemo.err;
  EXPECT_THAT(nemo.out, HasSubstr("--grad-reduce-in-bf16"));
  const CommandResult strata_stack = strata(plan + "--gradient-dtype bf16");
  EXPECT_EQ(strata_stack.exit_code, 1);
  EXPECT_EQ(lines(strata_stack.err), 1u) << strata_stack.err;
  EXPECT_THAT(strata_stack.err, HasSubstr("--gradient-dtype: bf16: Strata's executor accumulates "
                                          "and reduces gradients in fp32"));
  const CommandResult fp32_precision =
      strata(plan + "--framework nemo --precision fp32 --gradient-dtype bf16");
  EXPECT_EQ(fp32_precision.exit_code, 1);
  EXPECT_EQ(lines(fp32_precision.err), 1u) << fp32_precision.err;
  EXPECT_THAT(fp32_precision.err,
              HasSubstr("--gradient-dtype: bf16 with precision fp32: gradients are fp32"));
}

// Block-scaled precisions plan where the tensor cores have them and export their recipe to
// Megatron-LM; on Hopper the plan is refused with the one line that names the missing peak.
TEST(CliPlan, BlockScaledPrecisionsPlanOnBlackwellAndExportTheirRecipes) {
  const std::string llama = "plan --model llama3.1-8b --global-batch 64 --framework nemo ";
  const CommandResult nvfp4 =
      strata(llama + "--cluster dgx-b200 --precision nvfp4 --emit megatron");
  ASSERT_EQ(nvfp4.exit_code, 0) << nvfp4.err;
  EXPECT_THAT(nvfp4.out, HasSubstr("8192 tokens, nvfp4"));
  EXPECT_THAT(nvfp4.out, HasSubstr("--fp4-format e2m1"));
  EXPECT_THAT(nvfp4.out, HasSubstr("--fp4-recipe nvfp4"));
  const CommandResult mxfp8 =
      strata(llama + "--cluster gb200-nvl72:1x8 --precision mxfp8 --emit megatron");
  ASSERT_EQ(mxfp8.exit_code, 0) << mxfp8.err;
  EXPECT_THAT(mxfp8.out, HasSubstr("--fp8-recipe mxfp8"));
  const CommandResult hopper = strata(llama + "--cluster dgx-h100 --precision mxfp8");
  EXPECT_EQ(hopper.exit_code, 1);
  EXPECT_EQ(lines(hopper.err), 1u) << hopper.err;
  EXPECT_THAT(hopper.err, HasSubstr("/precision: \"mxfp8\": the cluster's GPU (H100-SXM5-80GB) "
                                    "has no mxfp8 peak"));
}

TEST(CliPlan, WritesPlansThatSimulateAsTheyAre) {
  const std::filesystem::path out = std::filesystem::path(::testing::TempDir()) /
                                    ("strata-plan-" + std::to_string(::getpid())) / "best.json";
  std::filesystem::create_directories(out.parent_path());
  const CommandResult run = strata(
      "plan --model gpt2-350m --cluster dgx-h100 --global-batch 64 --seq-len 1024 --top 3 "
      "--format json --emit megatron --out " +
      out.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");  // no progress bar when stderr is not a terminal
  const nlohmann::json report = nlohmann::json::parse(run.out);
  ASSERT_EQ(report.at("plans").size(), 3u);
  EXPECT_GT(report.at("statistics").at("candidates_enumerated").get<int>(), 1000);
  EXPECT_NE(report.at("megatron_arguments").get<std::string>().find("--global-batch-size 64"),
            std::string::npos);
  const double best = report.at("plans").at(0).at("step_time_s");
  const CommandResult simulated = strata("simulate --format json --plan " + out.string());
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_NEAR(nlohmann::json::parse(simulated.out).at("step_time_s").get<double>(), best,
              1e-9 * best);
  for (const char* name : {"best.2.json", "best.3.json"}) {
    EXPECT_EQ(strata("validate " + (out.parent_path() / name).string()).exit_code, 0) << name;
  }
  std::filesystem::remove_all(out.parent_path());
}

// `plan --phases`: a plan per phase, written as a plan set whose run `simulate` predicts to the
// same total (every phase's steps and the switches between them), and whose plans `schedule`
// lists by id; a trace lays one step of each phase out with the switches between them.
TEST(CliPlan, PhasesWriteAPlanSetThatSimulatesAndSchedules) {
  const std::filesystem::path directory =
      std::filesystem::path(::testing::TempDir()) / ("strata-phases-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  const std::string phases =
      std::string(STRATA_FIXTURES_DIR) + "/phases/valid/context-extension.json";
  const std::string set = (directory / "set.json").string();
  const CommandResult planned = strata("plan --model gpt-tiny --cluster cpu-local:4 --phases " +
                                       phases + " --format json --out " + set);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json report = nlohmann::json::parse(planned.out);
  ASSERT_EQ(report.at("phases").size(), 2u);
  double steps = 0, switches = 0;
  for (const nlohmann::json& phase : report.at("phases")) {
    steps += phase.at("steps_seconds").get<double>();
    if (phase.contains("switch_in")) switches += phase.at("switch_in").at("seconds").get<double>();
  }
  ASSERT_TRUE(report.at("phases")[1].contains("switch_in"));
  const double total = report.at("total_seconds");
  EXPECT_NEAR(total, steps + switches, 1e-12 * total);
  EXPECT_EQ(report.at("plan_set"), nlohmann::json::parse(slurp(set)));
  EXPECT_THAT(strata("validate " + set).out,
              HasSubstr("plan set for gpt-tiny on 4 ranks: 2 plans (short, long), 2 phases"));

  const CommandResult simulated = strata("simulate --format json --plan " + set);
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  const nlohmann::json prediction = nlohmann::json::parse(simulated.out);
  EXPECT_NEAR(prediction.at("total_seconds").get<double>(), total, 1e-9 * total);
  EXPECT_EQ(prediction.at("plans").size(), 2u);
  const CommandResult one = strata("simulate --format json --plan " + set + " --id long");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(one.out).at("step_time_s").get<double>(),
                   report.at("phases")[1].at("step_time_s").get<double>());
  const CommandResult table = strata("simulate --plan " + set);
  EXPECT_THAT(table.out, HasSubstr("predicted run: "));

  const std::string trace = (directory / "trace.json").string();
  ASSERT_EQ(strata("simulate --plan " + set + " --trace " + trace).exit_code, 0);
  const nlohmann::json events = nlohmann::json::parse(slurp(trace)).at("traceEvents");
  int switch_slices = 0;
  for (const nlohmann::json& event : events) {
    if (event.value("name", "").starts_with("SWITCH short -> long")) ++switch_slices;
  }
  EXPECT_EQ(switch_slices, 4);  // one on each rank

  const CommandResult schedules = strata("schedule --format json --plan " + set);
  ASSERT_EQ(schedules.exit_code, 0) << schedules.err;
  EXPECT_EQ(nlohmann::json::parse(schedules.out).at("plans")[1].at("id"), "long");
  const CommandResult unknown = strata("schedule --plan " + set + " --id middle");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, "strata: --id: \"middle\" is not a plan of " + set + " (short, long)\n");
  const CommandResult excluded =
      strata("plan --model gpt-tiny --cluster cpu-local:4 --phases " + phases + " --seq-len 64");
  EXPECT_EQ(excluded.exit_code, 2);
  std::filesystem::remove_all(directory);
}

// `plan --strategies K`: K plans of different meshes, fastest first, with the predicted switch
// between each ordered pair, as a plan set `train --plan-set S --switch STEP:ID` can use.
TEST(CliPlan, StrategiesWriteAPlanSetWithEverySwitch) {
  const std::filesystem::path directory = std::filesystem::path(::testing::TempDir()) /
                                          ("strata-strategies-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  const std::string set = (directory / "strategies.json").string();
  const CommandResult run = strata(
      "plan --model gpt-tiny --cluster cpu-local:8 --global-batch 16 --seq-len 64 --strategies 4 "
      "--out " +
      set);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("predicted switch between them"));
  const nlohmann::json written = nlohmann::json::parse(slurp(set));
  ASSERT_EQ(written.at("plans").size(), 4u);
  EXPECT_EQ(written.at("switches").size(), 12u);
  EXPECT_FALSE(written.contains("phases"));
  std::set<std::string> ids;
  for (const nlohmann::json& entry : written.at("plans")) ids.insert(entry.at("id"));
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(strata("validate " + set).exit_code, 0);
  std::filesystem::remove_all(directory);
}

// One admission rule (schemas/executor_admission.h): the strata framework's plans are what its
// executor runs, so plans it does not run (fp8: it trains in fp32 or bf16) are none of them;
// another stack's are for simulation.
TEST(CliPlan, PlansTheExecutorDoesNotRunGetNoStrataPlanAndSayWhy) {
  const CommandResult strata_plans = strata(
      "plan --model gpt2-124m --cluster dgx-h100 --global-batch 64 --seq-len 1024 --precision fp8");
  EXPECT_EQ(strata_plans.exit_code, 1);
  EXPECT_EQ(lines(strata_plans.err), 1u);
  EXPECT_THAT(strata_plans.err,
              HasSubstr("strata: no plan runs: strata's executor does not run these plans "
                        "(/precision: the executor trains in fp32 or bf16, not fp8)"));
  EXPECT_THAT(strata_plans.out, HasSubstr("No plan runs:"));
  const CommandResult other_stack = strata(
      "plan --model gpt2-124m --cluster dgx-h100 --global-batch 64 --seq-len 1024 --precision fp8 "
      "--framework megatron-deepspeed");
  EXPECT_EQ(other_stack.exit_code, 0) << other_stack.err;
  EXPECT_THAT(other_stack.out, HasSubstr("as megatron-deepspeed runs it (simulation only"));
}

TEST(CliPlan, NothingFitsExitsOneWithTheBindingConstraint) {
  const CommandResult run =
      strata("plan --model gpt3-1t --cluster dgx-h100 --global-batch 64 --seq-len 2048");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(lines(run.err), 1u);
  EXPECT_THAT(run.err, HasSubstr("strata: no plan fits: memory for model states"));
  EXPECT_THAT(run.out, HasSubstr("Nearest candidates"));
  const CommandResult too_long = strata("plan --model gpt2-124m --seq-len 4096");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_THAT(too_long.err,
              HasSubstr("--seq-len: 4096 is more than gpt2-124m's max_seq_length=1024"));
}

// The top K are K meshes (issue: five rows of one mesh at five interleavings tell a user nothing
// the first did not); --variants lists each layout. Llama 3.1 8B at 32K tokens on two nodes.
TEST(CliPlan, RowsAreDistinctMeshesUnlessVariantsAreAskedFor) {
  const std::string plan =
      "plan --model llama3.1-8b --cluster dgx-h100:2 --global-batch 32 "
      "--seq-len 32768 --quiet --format json";
  const auto mesh_of = [](const nlohmann::json& row) {
    const nlohmann::json& mesh = row.at("plan").at("mesh");
    return std::vector<nlohmann::json>{mesh.at("tp"), mesh.at("cp"), mesh.at("pp"), mesh.at("dp")};
  };
  const CommandResult distinct = strata(plan);
  ASSERT_EQ(distinct.exit_code, 0) << distinct.err;
  const nlohmann::json rows = nlohmann::json::parse(distinct.out).at("plans");
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_GT(rows.at(0).at("variants").get<std::int64_t>(), 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(mesh_of(rows.at(i)), mesh_of(rows.at(j)));
  }
  const CommandResult every = strata(plan + " --variants");
  ASSERT_EQ(every.exit_code, 0) << every.err;
  const nlohmann::json listed = nlohmann::json::parse(every.out).at("plans");
  EXPECT_EQ(mesh_of(listed.at(0)), mesh_of(listed.at(1)));
  for (const nlohmann::json& row : listed) EXPECT_EQ(row.at("variants"), 0);
  EXPECT_EQ(nlohmann::json::parse(strata(plan + " --all-variants").out).at("plans"), listed)
      << "the former name still works";
  const CommandResult table = strata(
      "plan --model llama3.1-8b --cluster dgx-h100:2 --global-batch 32 --seq-len 32768 --quiet");
  EXPECT_THAT(table.out, HasSubstr("variants: other layouts of the row's mesh"));
  EXPECT_THAT(table.out, HasSubstr("(--variants lists each)"));
}

TEST(CliPlan, ACpuClusterPlansInTheBestPrecisionItHasAndSaysSo) {
  const CommandResult run = strata(
      "plan --model gpt-tiny --cluster cpu-local:4 --global-batch 8 --seq-len 128 --format json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");  // stderr is for errors only; the plan's precision field says fp32
  const nlohmann::json report = nlohmann::json::parse(run.out);
  ASSERT_FALSE(report.at("plans").empty());
  EXPECT_EQ(report.at("plans").at(0).at("plan").at("precision"), "fp32");
  // simulate falls back the same way; a precision asked for by name is still checked.
  const CommandResult simulated =
      strata("simulate --model gpt-tiny --cluster cpu-local:2 --tp 2 --global-batch 8");
  EXPECT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_EQ(simulated.err, "");
  EXPECT_THAT(simulated.out,
              HasSubstr("note: the cluster's GPU (cpu-core) has no bf16 peak; using fp32 "
                        "(--precision to choose)\n"));
  const CommandResult table =
      strata("plan --model gpt-tiny --cluster cpu-local:4 --global-batch 8 --seq-len 128");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("8 × 128 tokens, fp32\nnote: the cluster's GPU (cpu-core) has "
                                   "no bf16 peak; using fp32"));
  const CommandResult asked =
      strata("simulate --model gpt-tiny --cluster cpu-local:2 --global-batch 8 --precision bf16");
  EXPECT_EQ(asked.exit_code, 1);
  EXPECT_THAT(asked.err, HasSubstr("/precision: \"bf16\": the cluster's GPU (cpu-core) has no "
                                   "bf16 peak"));
  // A GPU with bf16 plans in bf16 without a note.
  const CommandResult gpu = strata(
      "plan --model gpt2-124m --cluster dgx-h100 --global-batch 8 "
      "--seq-len 1024 --top 1 --format json");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_EQ(gpu.err, "");
  EXPECT_EQ(nlohmann::json::parse(gpu.out).at("plans").at(0).at("plan").at("precision"), "bf16");
}

}  // namespace
}  // namespace strata::tools
