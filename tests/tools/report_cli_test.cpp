// `strata report` and `strata plan --report` as users run them: one self-contained HTML page with
// a section per question, a timeline row per simulated rank, text from files escaped, and bad
// input refused in one line without writing the page.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

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
namespace fs = std::filesystem;

// tp 2 × pp 2 on four CPU ranks: two pipeline ranks, four ranks in all.
const fs::path kPipelinePlan = fixture("plan/valid/gpt2-cpu-tp2-pp2.json");
// Three plans, ids tp2dp2, dp4 and pp2.
const fs::path kPlanSet = fixture("plan_set/valid/gpt-micro-phases.json");

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t found = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++found;
  }
  return found;
}

struct ReportCli : ::testing::Test {
  void SetUp() override {
    directory = fs::path(::testing::TempDir()) /
                ("report-cli-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory);
    fs::create_directories(directory);
    out = directory / "report.html";
  }
  void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }
  // Runs `strata ARGUMENTS --out report.html`; the page it wrote, or "" when it wrote none.
  std::string report(const std::string& arguments) {
    run = strata(arguments + " --out " + out.string());
    return fs::exists(out) ? slurp(out) : "";
  }
  fs::path directory, out;
  CommandResult run;
};

TEST_F(ReportCli, APlanGetsEverySectionAndATimelineRowPerSimulatedRank) {
  const std::string html = report("report --plan " + kPipelinePlan.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "wrote " + out.string() + " (1 plan)\n");
  EXPECT_THAT(html, StartsWith("<!DOCTYPE html>"));
  for (const char* id : {"summary", "timeline", "memory", "breakdown"}) {
    EXPECT_THAT(html, HasSubstr(std::string("<section id=\"") + id + "\">")) << id;
  }
  // Without other plans or a log, those sections are left out.
  EXPECT_THAT(html, Not(HasSubstr("id=\"comparison\"")));
  EXPECT_THAT(html, Not(HasSubstr("id=\"measured\"")));
  // Symmetric mode simulates one rank per pipeline stage: two rows, named as the simulator names
  // them, each with compute slices (forward and backward kernels) drawn.
  EXPECT_EQ(count(html, "class=\"rank-row\""), 2u);
  EXPECT_THAT(html, HasSubstr(">pipeline rank 1</text>"));
  EXPECT_THAT(html, HasSubstr("class=\"t-forward\""));
  EXPECT_THAT(html, HasSubstr("class=\"t-backward\""));
  EXPECT_EQ(count(html, "class=\"memory-row\""), 2u);
  EXPECT_THAT(html, HasSubstr("class=\"limit\""));  // the capacity line
  EXPECT_THAT(html, HasSubstr("time in the step (ms)"));
  // Self-contained: nothing to fetch (the SVG namespace is a name, not a fetch).
  std::string without_namespace =
      std::regex_replace(html, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "");
  EXPECT_THAT(without_namespace, Not(HasSubstr("http")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));

  // Full mode simulates every rank: tp 2 × pp 2 = four rows.
  const std::string full = report("report --mode full --plan " + kPipelinePlan.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(count(full, "class=\"rank-row\""), 4u);
  EXPECT_THAT(full, HasSubstr(">rank 3 (tp 1, cp 0, dp 0, pp 1)</text>"));
}

TEST_F(ReportCli, TextFromFilesIsEscaped) {
  // A plan file's name is its label in the comparison.
  const fs::path odd = directory / "a<b>&\"c'.json";
  fs::copy_file(kPipelinePlan, odd);
  const std::string html = report("report --plan " + kPipelinePlan.string() + " --compare '" +
                                  std::regex_replace(odd.string(), std::regex("'"), "'\\''") + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(html, HasSubstr("a&lt;b&gt;&amp;&quot;c&#39;.json"));
  EXPECT_THAT(html, Not(HasSubstr("a<b>")));
}

TEST_F(ReportCli, APlanSetIsComparedWithItsFirstOrChosenPlan) {
  const std::string html = report("report --plan " + kPlanSet.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(html, HasSubstr("<section id=\"comparison\">"));
  EXPECT_EQ(count(html, "class=\"plan-row\""), 3u);
  EXPECT_THAT(html, HasSubstr("<p class=\"plan-line\">tp2dp2: "));
  // Each plan after the first says how its step differs and which parts make the difference.
  EXPECT_EQ(count(html, " ms (+") + count(html, " ms (\u2212") + count(html, " s (+") +
                count(html, " s (\u2212"),
            2u);

  const std::string chosen = report("report --plan " + kPlanSet.string() + " --id pp2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(chosen, HasSubstr("<p class=\"plan-line\">pp2: "));
  EXPECT_THAT(chosen, HasSubstr("<td class=\"num\">1</td><td>pp2</td>"));
  EXPECT_THAT(chosen, HasSubstr("<td class=\"num\">2</td><td>tp2dp2</td>"));
}

TEST_F(ReportCli, PlanWritesItsTopKAsAReport) {
  const CommandResult plan = strata(
      "plan --model gpt-tiny --cluster cpu-local:4 --global-batch 8 --seq-len 64 --top 3 --quiet "
      "--report " +
      out.string());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr("wrote report " + out.string() + "\n"));
  const std::string html = slurp(out);
  EXPECT_THAT(html, HasSubstr("<section id=\"timeline\">"));
  EXPECT_THAT(html, HasSubstr("<section id=\"comparison\">"));
  EXPECT_EQ(count(html, "class=\"plan-row\""), 3u);
  // Ranked by step time: every plan after the first is slower.
  EXPECT_EQ(count(html, " ms (+") + count(html, " s (+"), 2u);
}

TEST_F(ReportCli, ATrainingLogIsDrawnBesideThePrediction) {
  // Both formats `strata train` logs in (train_log.cpp): 120 and 100 ms measured against 100 ms
  // predicted, a mean ratio of (1.2 + 1.0) / 2 = 1.1.
  const fs::path text_log = directory / "train.log";
  write(text_log,
        "4 ranks: tp 2 × dp 2, ZeRO-1, gpt-tiny over mpi\n"
        "step 1/2 | loss 5.5766 | lr 3.00e-04 | grad norm 11.827 | 3397 tokens/s | 120.0 ms "
        "(predicted 100.0 ms, ×1.20) | model memory 0.07 GiB (predicted 0.07; RSS 0.23)\n"
        "step 2/2 | val loss 4.0000 | 1 batch in 3.0 ms\n"
        "step 2/2 | loss 4.8017 | lr 2.60e-04 | grad norm 5.852 | 6414 tokens/s | 100.0 ms "
        "(predicted 100.0 ms, ×1.00)\n"
        "trained steps 1..2 in 0.4 s: final loss 4.8017, 5230 tokens/s\n");
  const fs::path json_log = directory / "train.jsonl";
  write(json_log,
        "{\"step\":1,\"step_time_s\":0.12,\"predicted_step_time_s\":0.1,\"loss\":5.5}\n"
        "{\"eval_step\":1,\"validation_loss\":4.0}\n"
        "{\"step\":2,\"step_time_s\":0.1,\"predicted_step_time_s\":0.1,\"loss\":4.8}\n"
        "{\"summary\":true,\"steps_run\":2}\n");
  for (const fs::path& log : {text_log, json_log}) {
    const std::string html =
        report("report --plan " + kPipelinePlan.string() + " --train-log " + log.string());
    ASSERT_EQ(run.exit_code, 0) << log << ": " << run.err;
    EXPECT_THAT(run.out, HasSubstr(", 2 measured steps)"));
    EXPECT_THAT(html, HasSubstr("<section id=\"measured\">"));
    EXPECT_THAT(html, HasSubstr("<strong class=\"mean-ratio\">×1.100</strong>")) << log;
    EXPECT_EQ(count(html, "class=\"measured-point\""), 2u);
    EXPECT_THAT(html, HasSubstr("<td class=\"num\">×1.200</td>"));
  }
}

TEST_F(ReportCli, ARealTrainingLogReads) {
  const std::string text = "/usr/share/common-licenses/GPL-3";
  if (!fs::exists(text)) GTEST_SKIP() << text << " is not installed";
  const std::string tokens = (directory / "gpl.bin").string();
  const std::string plan = (directory / "tiny.json").string();
  ASSERT_EQ(strata("data --text " + text + " --out " + tokens).exit_code, 0);
  for (const char* format : {"text", "json"}) {
    const fs::path log = directory / (std::string("train.") + format);
    const CommandResult train = strata(
        "train --model gpt-tiny --global-batch 8 --seq-len 64 --micro-batch 4 --steps 3 --data " +
        tokens + " --write-plan " + plan + " --log-format " + format);
    ASSERT_EQ(train.exit_code, 0) << train.err;
    write(log, train.out);
    const std::string html = report("report --plan " + plan + " --train-log " + log.string());
    ASSERT_EQ(run.exit_code, 0) << format << ": " << run.err;
    EXPECT_THAT(html, HasSubstr("<p>3 steps of <code>train." + std::string(format) + "</code>"));
  }
}

TEST_F(ReportCli, BadInputIsOneLineAndWritesNoPage) {
  const fs::path truncated = directory / "truncated.json";
  write(truncated, "{\"schema_version\": 1, \"kind\": \"plan\", \"mesh\": {\"tp\": 2");
  const fs::path wrong_tp = directory / "wrong-tp.json";
  write(wrong_tp, std::regex_replace(slurp(kPipelinePlan), std::regex("\"tp\": 2"), "\"tp\": 5"));
  const fs::path no_steps = directory / "empty.log";
  write(no_steps, "trained steps 1..0\n");
  const fs::path bad_step = directory / "bad.jsonl";
  write(bad_step, "{\"step\":1,\"step_time_s\":-1,\"predicted_step_time_s\":0.1}\n");
  // Finite but beyond any step: their ratio and the chart's coordinates would overflow (×inf, nan).
  const fs::path extreme_step = directory / "extreme.jsonl";
  write(extreme_step, "{\"step\":1,\"step_time_s\":0.1,\"predicted_step_time_s\":1e-308}\n");
  const fs::path extreme_text = directory / "extreme.log";
  write(extreme_text, "step  1/1 | loss 5.1 | 10 tokens/s | 1" + std::string(300, '0') +
                          " ms (predicted 0.0000001 ms, x1.00) |\n");
  const std::string plan = " --plan " + kPipelinePlan.string();
  const std::pair<std::string, std::string> cases[] = {
      {"report --plan " + truncated.string(), truncated.string() + ": line 1, column 55: invalid"},
      {"report --plan " + wrong_tp.string(), wrong_tp.string() + ": /mesh"},
      {"report" + plan + " --compare " + wrong_tp.string(), wrong_tp.string() + ": /mesh"},
      {"report" + plan + " --id pp2", "--id: picks a plan of a plan set"},
      {"report --plan " + kPlanSet.string() + " --id nope", "--id: \"nope\" is not a plan of"},
      {"report" + plan + " --train-log " + no_steps.string(),
       no_steps.string() + ": no training steps in it"},
      {"report" + plan + " --train-log " + bad_step.string(),
       bad_step.string() +
           ": line 1: /step_time_s: must be a step time from 1e-09 to 1e+09 seconds, not -1"},
      {"report" + plan + " --train-log " + extreme_step.string(),
       extreme_step.string() + ": line 1: /predicted_step_time_s: must be a step time from 1e-09 "
                               "to 1e+09 seconds, not 1e-308"},
      {"report" + plan + " --train-log " + extreme_text.string(),
       extreme_text.string() + ": line 1: a step's measured and predicted times must be from "
                               "1e-09 to 1e+09 seconds"},
      {"report" + plan + " --train-log " + (directory / "missing.log").string(),
       (directory / "missing.log").string()},
  };
  for (const auto& [arguments, message] : cases) {
    const std::string html = report(arguments);
    EXPECT_EQ(run.exit_code, 1) << arguments;
    EXPECT_EQ(lines(run.err), 1u) << arguments << ": " << run.err;
    EXPECT_THAT(run.err, StartsWith("strata: " + message)) << arguments;
    EXPECT_EQ(run.out, "") << arguments;
    EXPECT_FALSE(fs::exists(out)) << arguments;
  }
  // --out is required; a usage error.
  EXPECT_EQ(strata("report" + plan).exit_code, 2);
}

}  // namespace
}  // namespace strata::tools
