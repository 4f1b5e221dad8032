// The strata binary as users run it: exit codes (0 ok, 1 invalid input, 2 usage), what goes to
// stdout and stderr, and that errors are one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

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

TEST(Cli, VersionAndHelp) {
  const CommandResult version = strata("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, StartsWith("strata 0.1.0 (CUDA toolkit: "));
  const CommandResult help = strata("--help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* command : {"presets", "validate", "describe"})
    EXPECT_THAT(help.out, HasSubstr(command));
  const CommandResult describe_help = strata("describe --help");
  EXPECT_EQ(describe_help.exit_code, 0);
  EXPECT_THAT(describe_help.out, HasSubstr("--seq-len"));
}

TEST(Cli, UsageErrorsExitTwoWithOneLine) {
  for (const char* arguments :
       {"", "bogus", "describe --format xml", "validate", "describe --seq-len 0", "presets --show",
        "profile --stall-timeout -1"}) {
    const CommandResult run = strata(arguments);
    EXPECT_EQ(run.exit_code, 2) << arguments;
    EXPECT_EQ(lines(run.err), 1u) << arguments << ": " << run.err;
    EXPECT_THAT(run.err, StartsWith("strata: ")) << arguments;
    EXPECT_EQ(run.out, "") << arguments;
  }
  EXPECT_EQ(strata("describe --format xml").err,
            "strata: --format: xml not in {table,json} (see strata --help)\n");
  // Every command that runs ranks together takes the stall timeout.
  EXPECT_THAT(strata("profile --stall-timeout -1").err, HasSubstr("--stall-timeout"));
  EXPECT_THAT(strata("profile --help").out, HasSubstr("--stall-timeout"));
}

TEST(Cli, InvalidInputExitsOneWithTheReason) {
  const CommandResult unknown = strata("describe --model llama3-8b");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err,
            "strata: --model: \"llama3-8b\" is neither a model preset nor a file; did you mean "
            "\"llama3.1-8b\"?\n");
  const CommandResult too_long = strata("describe --model gpt2-124m --seq-len 5000");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_EQ(too_long.err, "strata: --seq-len: 5000 is more than gpt2-124m's max_seq_length=1024\n");
  const CommandResult cluster = strata("describe --cluster dgx-h100:zero");
  EXPECT_EQ(cluster.exit_code, 1);
  EXPECT_EQ(lines(cluster.err), 1u);
}

TEST(Cli, DescribeReportsCountsFlopsAndMinimumGpus) {
  const CommandResult run = strata("describe --model gpt2-124m --format json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report.at("parameters"), 124439808);
  EXPECT_EQ(report.at("seq_length"), 1024);
  EXPECT_EQ(report.at("flops_per_token").at("forward"), 284812800.0);
  EXPECT_EQ(report.at("parameters_by_component").at("position_embedding"), 786432);
  EXPECT_EQ(report.at("model_state_bytes").at("fp16").at("total"), 16 * 124439808LL);
  EXPECT_EQ(report.at("model_state_bytes").at("bf16").at("total"), 18 * 124439808LL);

  // 70,553,706,496 params × 18 B (bf16, fp32 gradients) over (85,520,809,984 − 2 GiB −
  // ⌈0.03 × 85,520,809,984⌉ = 80,807,702,036 usable bytes) = 15.7 → 16 GPUs.
  const CommandResult on_cluster =
      strata("describe --model llama3.1-70b --cluster dgx-h100:8 --format json");
  ASSERT_EQ(on_cluster.exit_code, 0) << on_cluster.err;
  const nlohmann::json cluster = nlohmann::json::parse(on_cluster.out).at("cluster");
  EXPECT_EQ(cluster.at("usable_memory_bytes_per_gpu"), 80807702036LL);
  EXPECT_EQ(cluster.at("min_gpus_for_model_states"), 16);
  EXPECT_EQ(cluster.at("gpus"), 64);

  const CommandResult table =
      strata("describe --model llama3.1-8b --cluster dgx-h100 --seq-len 8192");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("Model llama3.1-8b (llama): 8,030,261,248 parameters"));
  EXPECT_THAT(table.out, HasSubstr("forward 19.30 GFLOP"));
  EXPECT_THAT(table.out, HasSubstr("at least 2 GPUs when fully sharded"));
}

TEST(Cli, DescribeReadsHuggingFaceConfigs) {
  const CommandResult run =
      strata("describe --format json --model " + fixture("hf/qwen2-7b.json").string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out).at("parameters"), 7615616512LL);
}

TEST(Cli, DescribeCountsTheActiveExpertsOfAMixture) {
  const CommandResult json = strata("describe --format json --model mixtral-8x7b --seq-len 4096");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report.at("parameters"), 46702792704LL);
  EXPECT_EQ(report.at("active_parameters"), 12879925248LL);
  EXPECT_EQ(report.at("parameters_by_component").at("routed_experts"), 32LL * 8 * 3 * 4096 * 14336);
  EXPECT_EQ(report.at("parameters_by_component").at("router"), 32LL * 4096 * 8);
  EXPECT_EQ(report.at("parameters_by_component").at("mlp"), 0) << "no dense layer";
  EXPECT_DOUBLE_EQ(report.at("flops_per_token").at("forward").get<double>(), 27644657664.0);

  const CommandResult table = strata("describe --model deepseek-v3 --seq-len 4096");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("671,026,419,200 parameters"));
  EXPECT_THAT(table.out, HasSubstr("256 routed experts, 8 per token, 1 shared on 58 of 61 layers"));
  EXPECT_THAT(table.out, HasSubstr("mlp (3 dense layers)"));
  EXPECT_THAT(table.out, HasSubstr("routed experts (58 MoE layers × 256)"));
}

// The planner searches the expert mesh (the table gains ep and etp columns); plans for Strata's
// own executor keep to the layouts its MoE layer runs. A hand-made expert mesh simulates, under
// the same rules.
TEST(Cli, MixturesOfExpertsPlanWithTheirExpertMesh) {
  const CommandResult plan = strata(
      "plan --model mixtral-8x7b --cluster dgx-h100:2 --global-batch 64 --seq-len 4096 "
      "--framework megatron-lm --top 2");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr(" ep "));
  EXPECT_THAT(plan.out, HasSubstr(" etp "));
  // Strata's executor trains experts on every mesh (tp with sequence parallelism, etp, ep over
  // tp × cp × dp), so the search for it leaves no expert mesh out and says nothing of refusals.
  const CommandResult for_strata = strata(
      "plan --model mixtral-8x7b --cluster dgx-h100:2 --global-batch 64 --seq-len 4096 "
      "--format json --top 3");
  ASSERT_EQ(for_strata.exit_code, 0) << for_strata.err;
  const nlohmann::json strata_plans = nlohmann::json::parse(for_strata.out);
  ASSERT_FALSE(strata_plans.at("plans").empty()) << for_strata.out;
  bool expert_parallel = false;
  for (const nlohmann::json& ranked : strata_plans.at("plans")) {
    const nlohmann::json& mesh = ranked.at("plan").at("mesh");
    EXPECT_TRUE(mesh.at("tp") == 1 || ranked.at("plan").at("sequence_parallel") == true);
    if (mesh.value("ep", 1) > 1) expert_parallel = true;
  }
  EXPECT_TRUE(expert_parallel) << for_strata.out;  // 8 experts over 16 GPUs: ep pays
  const CommandResult strata_table =
      strata("plan --model mixtral-8x7b --cluster dgx-h100:2 --global-batch 64 --seq-len 4096");
  ASSERT_EQ(strata_table.exit_code, 0) << strata_table.err;
  EXPECT_THAT(strata_table.out, Not(HasSubstr("the executor does not run")));
  const std::string deepseek =
      "simulate --model deepseek-v3 --cluster dgx-h100:32 --tp 8 --pp 8 --global-batch 256 "
      "--seq-len 4096 --precision fp8 --zero 1 --framework megatron-lm ";
  const CommandResult without_sp = strata(deepseek + "--ep 4");
  EXPECT_EQ(without_sp.exit_code, 1);
  EXPECT_THAT(without_sp.err, HasSubstr("/sequence_parallel: a mixture-of-experts model with "
                                        "tp=8 needs sequence parallelism"));
  const CommandResult simulated = strata(deepseek + "--sequence-parallel --ep 4");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_THAT(simulated.out, HasSubstr("ep=4 etp=1 edp=8"));
}

TEST(Cli, PresetsListAndShow) {
  const CommandResult table = strata("presets");
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_THAT(table.out, HasSubstr("llama3.1-405b"));
  EXPECT_THAT(table.out, HasSubstr("405,853,388,800"));
  EXPECT_THAT(table.out, HasSubstr("dgx-h200"));
  const nlohmann::json listing = nlohmann::json::parse(strata("presets --format json").out);
  // 22 dense published models, 5 mixtures of experts, gpt-tiny, llama-tiny and moe-tiny.
  EXPECT_EQ(listing.at("models").size(), 30u);
  // A100 40/80 GB, H100, H200, B200, GB200 NVL72, MI300X, MI355X and the local CPU.
  EXPECT_EQ(listing.at("clusters").size(), 9u);
  EXPECT_THAT(table.out, HasSubstr("nvfp4=9000"));

  const CommandResult shown = strata("presets --show dgx-h100:4");
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(nlohmann::json::parse(shown.out).at("nodes"), 4);
  const std::filesystem::path saved = std::filesystem::path(::testing::TempDir()) /
                                      ("shown-cluster-" + std::to_string(::getpid()) + ".json");
  std::ofstream(saved) << shown.out;
  EXPECT_EQ(strata("validate " + saved.string()).exit_code, 0) << "a shown preset is a valid file";
  EXPECT_EQ(strata("presets --show nope").exit_code, 1);
}

TEST(Cli, ValidateDetectsKindsAndReportsEachInvalidFile) {
  const std::string model = fixture("model/valid/gpt-minimal.json").string();
  const std::string plan = fixture("plan/valid/gpt2-cpu-tp2-pp2.json").string();
  const std::string hf = fixture("hf/llama-3.1-8b.json").string();
  const CommandResult ok = strata("validate " + model + " " + plan + " " + hf);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.err, "");
  EXPECT_THAT(ok.out, HasSubstr(model + ": ok: model gpt-minimal (gpt), 3,323,392 parameters"));
  EXPECT_THAT(
      ok.out,
      HasSubstr(
          plan +
          ": ok: plan for gpt2-124m on 4 GPUs of cpu-local: tp=2 cp=1 dp=1 pp=2 vpp=1, 1f1b"));
  EXPECT_THAT(
      ok.out,
      HasSubstr(hf +
                ": ok: Hugging Face config of llama-3.1-8b (llama), 8,030,261,248 parameters"));

  const std::filesystem::path broken = std::filesystem::path(::testing::TempDir()) /
                                       ("broken-" + std::to_string(::getpid())) / "plan.json";
  std::filesystem::create_directories(broken.parent_path());
  std::ofstream(broken) << "{\"kind\": \"plan\", \"schema_version\": 1,\n \"mesh\": }";
  const CommandResult mixed =
      strata("validate --format json " + broken.string() + " " + model + " missing.json");
  EXPECT_EQ(mixed.exit_code, 1);
  EXPECT_EQ(mixed.err, "strata: " + broken.string() +
                           ": line 2, column 10: invalid JSON: syntax error while parsing value - "
                           "unexpected '}'; expected '[', '{', or a literal\n"
                           "strata: missing.json: cannot open: No such file or directory\n");
  const nlohmann::json report = nlohmann::json::parse(mixed.out);
  ASSERT_EQ(report.size(), 3u);
  EXPECT_FALSE(report[0].at("valid"));
  EXPECT_TRUE(report[1].at("valid"));
  EXPECT_EQ(report[1].at("kind"), "model");
  EXPECT_FALSE(report[2].at("valid"));
}

TEST(Cli, SchedulePrintsEachRanksActions) {
  const std::string plan = fixture("plan/valid/gpt2-cpu-tp2-pp2.json").string();
  const CommandResult run = strata("schedule --plan " + plan + " --rank 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(
      run.out,
      "1f1b schedule: pp=2 vpp=1 micro-batches=4\n"
      "rank 1 (stages 1; peak in flight 1):\n"
      "  1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2 1RECV_F3 "
      "1F3 1B3 1SEND_B3 1TIED_GRAD STEP\n");
  const nlohmann::json report =
      nlohmann::json::parse(strata("schedule --format json --plan " + plan).out);
  EXPECT_EQ(report.at("ranks").size(), 2u);
  EXPECT_EQ(report.at("ranks")[0].at("peak_in_flight_micro_batches"), 2);
  const CommandResult bad_rank = strata("schedule --plan " + plan + " --rank 2");
  EXPECT_EQ(bad_rank.exit_code, 1);
  EXPECT_EQ(bad_rank.err, "strata: --rank: 2 is not a pipeline rank; " + plan + " has pp=2\n");
}

}  // namespace
}  // namespace strata::tools

namespace strata::tools {
namespace {

TEST(CliSimulate, PlanFilesAndFlagsGiveTheSameReport) {
  const std::string plan = fixture("plan/valid/gpt3-175b-a100-interleaved.json").string();
  const CommandResult from_file = strata("simulate --format json --plan " + plan);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  const nlohmann::json report = nlohmann::json::parse(from_file.out);
  for (const char* key : {"step_time_s", "tokens_per_s", "model_tflops_per_gpu", "mfu",
                          "hardware_tflops_per_gpu", "bubble_fraction"}) {
    EXPECT_GT(report.at(key).get<double>(), 0) << key;
  }
  EXPECT_EQ(report.at("stages").size(), 16u);
  EXPECT_TRUE(report.at("stages").at(0).contains("fits"));
  double parts = 0;
  for (const auto& [name, seconds] : report.at("breakdown").items()) parts += seconds.get<double>();
  EXPECT_NEAR(parts, report.at("step_time_s").get<double>(), 1e-6);

  const CommandResult from_flags = strata(
      "simulate --format json --model gpt3-175b --cluster dgx-h100 --tp 8 --pp 8 --dp 4 "
      "--vpp 2 --micro-batch 1 --global-batch 256 --seq-len 2048 --recompute selective "
      "--sequence-parallel --zero 1 --schedule interleaved-1f1b --precision bf16");
  ASSERT_EQ(from_flags.exit_code, 0) << from_flags.err;
  const nlohmann::json flags = nlohmann::json::parse(from_flags.out);
  EXPECT_EQ(flags.at("gpus"), 256);
  EXPECT_EQ(flags.at("stages").size(), 8u);

  const CommandResult table =
      strata("simulate --model gpt2-124m --cluster dgx-h100 --global-batch 64 --seq-len 1024");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("step time"));
  EXPECT_THAT(table.out, HasSubstr("pipeline bubble"));
  EXPECT_THAT(table.out, HasSubstr("memory per pipeline rank"));
}

// --no-overlap-grad-reduce reduces the 8 data-parallel replicas' gradients after the backward:
// nothing of it hides behind the last backward, so the step is longer and the table says so.
TEST(CliSimulate, GradientReductionAfterTheBackwardIsSlower) {
  const std::string knobs =
      "simulate --model gpt2-124m --cluster dgx-h100 --global-batch 64 --seq-len 1024";
  const CommandResult overlapped = strata(knobs + " --format json");
  const CommandResult after = strata(knobs + " --format json --no-overlap-grad-reduce");
  ASSERT_EQ(overlapped.exit_code, 0) << overlapped.err;
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_GT(nlohmann::json::parse(after.out).at("step_time_s").get<double>(),
            nlohmann::json::parse(overlapped.out).at("step_time_s").get<double>());
  EXPECT_THAT(strata(knobs + " --no-overlap-grad-reduce").out,
              HasSubstr("gradients reduced after the backward"));
}

TEST(CliSimulate, OverlappedTpCommunicationIsFasterAndNeedsSequenceParallelism) {
  const std::string knobs =
      "simulate --model llama3.1-70b --cluster dgx-h100:2 --tp 8 --pp 2 --global-batch 16 "
      "--seq-len 4096 --format json --sequence-parallel";
  const CommandResult exposed = strata(knobs);
  const CommandResult overlapped = strata(knobs + " --tp-comm-overlap");
  ASSERT_EQ(exposed.exit_code, 0) << exposed.err;
  ASSERT_EQ(overlapped.exit_code, 0) << overlapped.err;
  EXPECT_LT(nlohmann::json::parse(overlapped.out).at("step_time_s").get<double>(),
            nlohmann::json::parse(exposed.out).at("step_time_s").get<double>());
  const CommandResult refused = strata(
      "simulate --model llama3.1-70b --cluster dgx-h100 --tp 8 --global-batch 8 --tp-comm-overlap");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("/tp_comm_overlap: needs sequence_parallel"));
}

// DeepSpeed's pipeline engine (whole activations, blocking sends) on a pipelined plan without
// sequence parallelism is slower than the same plan as Strata runs it, and says so; the plan
// search takes the same flag, and an unknown stack is refused by name.
TEST(CliSimulate, AFrameworkChangesThePredictionAndIsNamed) {
  const std::string knobs =
      "simulate --model gpt2-774m --cluster dgx-a100-80gb:4 --tp 2 --pp 4 --global-batch 64 "
      "--zero 1";
  const CommandResult strata_run = strata(knobs + " --format json");
  const CommandResult deepspeed = strata(knobs + " --format json --framework megatron-deepspeed");
  ASSERT_EQ(strata_run.exit_code, 0) << strata_run.err;
  ASSERT_EQ(deepspeed.exit_code, 0) << deepspeed.err;
  EXPECT_GT(nlohmann::json::parse(deepspeed.out).at("step_time_s").get<double>(),
            nlohmann::json::parse(strata_run.out).at("step_time_s").get<double>());
  EXPECT_THAT(strata(knobs + " --framework deepspeed").out, HasSubstr("as deepspeed runs it"));
  const CommandResult plan = strata(
      "plan --model gpt2-124m --cluster dgx-a100-80gb:1 --global-batch 32 --quiet --top 1 "
      "--framework megatron-deepspeed --format json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(nlohmann::json::parse(plan.out).at("plans").at(0).at("plan").at("framework"),
            "megatron-deepspeed");
  const CommandResult unknown = strata(knobs + " --framework colossalai");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("--framework"));
}

// Unfused attention keeps the s×s scores: more activation memory than flash for the same plan.
TEST(CliSimulate, UnfusedAttentionHoldsTheScores) {
  const std::string knobs =
      "simulate --model gpt2-774m --cluster dgx-a100-80gb --tp 2 --global-batch 32 --micro-batch 4 "
      "--format json";
  const CommandResult flash = strata(knobs);
  const CommandResult unfused = strata(knobs + " --attention unfused");
  ASSERT_EQ(flash.exit_code, 0) << flash.err;
  ASSERT_EQ(unfused.exit_code, 0) << unfused.err;
  const auto peak = [](const CommandResult& run) {
    return nlohmann::json::parse(run.out).at("stages").at(0).at("activations_bytes").get<double>();
  };
  EXPECT_GT(peak(unfused), peak(flash));
}

TEST(CliSimulate, WritesAPerfettoTrace) {
  const std::filesystem::path trace = std::filesystem::path(::testing::TempDir()) /
                                      ("strata-trace-" + std::to_string(::getpid()) + ".json");
  const CommandResult run = strata(
      "simulate --model gpt2-124m --cluster dgx-h100 --tp 2 --pp 2 --global-batch 16 "
      "--seq-len 1024 --trace " +
      trace.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("trace written to"));
  std::ifstream file(trace);
  const nlohmann::json events = nlohmann::json::parse(file).at("traceEvents");
  EXPECT_GT(events.size(), 20u);
  std::filesystem::remove(trace);
}

TEST(CliSimulate, BadKnobsAreOneLineErrors) {
  const CommandResult heads = strata(
      "simulate --model gpt3-175b --cluster dgx-h100:8 --tp 64 --global-batch 8 --seq-len 2048");
  EXPECT_EQ(heads.exit_code, 1);
  EXPECT_EQ(lines(heads.err), 1u);
  EXPECT_THAT(heads.err, HasSubstr("command line: /mesh/tp"));
  const CommandResult batch = strata(
      "simulate --model gpt2-124m --cluster dgx-h100 --dp 8 --global-batch 12 --seq-len 1024");
  EXPECT_EQ(batch.exit_code, 1);
  EXPECT_THAT(batch.err, HasSubstr("/batch/global_batch_size: 12 is not a multiple"));
  const CommandResult uneven =
      strata("simulate --model gpt2-124m --cluster dgx-h100 --tp 3 --global-batch 8");
  EXPECT_EQ(uneven.exit_code, 1);
  EXPECT_THAT(uneven.err, HasSubstr("--tp: tp·cp·pp = 3 does not divide the cluster's 8 GPUs"));
  const CommandResult both = strata("simulate --plan x.json --tp 2");
  EXPECT_EQ(both.exit_code, 2);
}

TEST(CliValidateSim, ReportsEachRunAndTheErrorSummary) {
  const CommandResult run = strata("validate-sim --format json " +
                                   fixture("validation/published_runs_sample.jsonl").string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  ASSERT_EQ(report.at("runs").size(), 3u);
  EXPECT_FALSE(report.at("runs").at(2).at("complete"));
  EXPECT_EQ(report.at("summary").at("complete_rows"), 2);
  const nlohmann::json& first = report.at("runs").at(0);
  EXPECT_NEAR(first.at("error").get<double>(),
              first.at("predicted_step_time_s").get<double>() /
                      first.at("measured_step_time_s").get<double>() -
                  1,
              1e-12);
  EXPECT_GE(report.at("summary").at("worst_abs_error").get<double>(),
            report.at("summary").at("mean_abs_error").get<double>());

  const CommandResult bad = strata("validate-sim " + fixture("validation/bad_gpu.jsonl").string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(lines(bad.err), 1u);
  EXPECT_THAT(bad.err, HasSubstr("bad_gpu.jsonl:1: /system/gpu: \"v100\" is not one of"));
}

// The mixture-of-experts rows (Megatron-Bridge's H100, B200 and GB200 tables): each complete row
// becomes a plan with its expert mesh, written out by --write-plans and simulated to the same step
// time, with the token exchange in its own part of the breakdown.
TEST(CliValidateSim, SimulatesMixtureOfExpertsRowsAndWritesTheirPlans) {
  const std::filesystem::path directory = std::filesystem::path(::testing::TempDir()) /
                                          ("strata-moe-plans-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  const CommandResult run =
      strata("validate-sim --format json --write-plans " + directory.string() + " " +
             fixture("validation/moe_runs.jsonl").string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report.at("summary").at("complete_rows"), 20);
  for (const nlohmann::json& row : report.at("runs")) {
    if (!row.at("complete").get<bool>()) continue;
    const std::string id = row.at("id").get<std::string>();
    EXPECT_GT(row.at("breakdown").at("ep_comm_s").get<double>(), 0) << id;
    const std::filesystem::path plan = directory / (id + ".json");
    ASSERT_TRUE(std::filesystem::exists(plan)) << id;
    const CommandResult simulated = strata("simulate --format json --plan " + plan.string());
    ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
    EXPECT_NEAR(nlohmann::json::parse(simulated.out).at("step_time_s").get<double>(),
                row.at("predicted_step_time_s").get<double>(),
                1e-9 * row.at("predicted_step_time_s").get<double>())
        << id;
  }
  std::filesystem::remove_all(directory);
}

// The dense Megatron-Bridge rows on B200, GB200 NVL72 and H100 in fp8, mxfp8 and nvfp4 (the rows
// the Blackwell presets were calibrated on): each becomes a plan in its precision on its machine,
// and the calibration holds them within 6% each, 4% on average (schemas/presets/README.md).
TEST(CliValidateSim, BlackwellRowsInEveryPrecisionStayWithinTheirCalibration) {
  const CommandResult run = strata("validate-sim --format json " +
                                   fixture("validation/megatron_bridge_runs.jsonl").string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  std::set<std::string> precisions;
  double blackwell_error = 0;
  int blackwell_rows = 0;
  for (const nlohmann::json& row : report.at("runs")) {
    const std::string id = row.at("id").get<std::string>();
    precisions.insert(id.substr(id.rfind('-') + 1));
    if (id.find("h100") != std::string::npos) continue;
    const double error = std::abs(row.at("error").get<double>());
    EXPECT_LT(error, 0.06) << id;
    blackwell_error += error;
    ++blackwell_rows;
  }
  EXPECT_EQ(blackwell_rows, 12);
  EXPECT_LT(blackwell_error / blackwell_rows, 0.04);
  EXPECT_EQ(precisions, (std::set<std::string>{"fp8", "mxfp8", "nvfp4"}));
}

TEST(CliSimulate, ExpertParallelKnobs) {
  const std::string knobs =
      "simulate --model mixtral-8x7b --cluster dgx-h100:1 --tp 2 --sequence-parallel "
      "--global-batch 16 --seq-len 4096 --framework megatron-lm --zero 1 ";
  const CommandResult run = strata(knobs + "--ep 4 --ep-comm-overlap");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("ep=4 etp=1 edp=2 (all-to-all overlapped)"));
  EXPECT_THAT(run.out, HasSubstr("ep communication"));
  const CommandResult uneven = strata(knobs + "--ep 3");
  EXPECT_EQ(uneven.exit_code, 1);
  EXPECT_EQ(lines(uneven.err), 1u);
  EXPECT_THAT(uneven.err, HasSubstr("/mesh/ep: 3 does not divide num_experts=8"));
}

TEST(CliSimulate, RecomputeModulesKeepLessAndAreNamed) {
  const std::string knobs =
      "simulate --model mixtral-8x7b --cluster dgx-h100:1 --tp 2 --sequence-parallel --ep 4 "
      "--global-batch 16 --seq-len 4096 --framework megatron-lm --zero 1 --recompute selective ";
  const CommandResult attention = strata(knobs + "--format json");
  const CommandResult experts = strata(knobs + "--recompute-modules core_attn,layernorm,moe_act");
  const CommandResult experts_json =
      strata(knobs + "--recompute-modules core_attn,layernorm,moe_act --format json");
  ASSERT_EQ(attention.exit_code, 0) << attention.err;
  ASSERT_EQ(experts.exit_code, 0) << experts.err;
  EXPECT_THAT(experts.out, HasSubstr("recompute selective (core_attn, layernorm, moe_act)"));
  const auto activations = [](const CommandResult& run) {
    return nlohmann::json::parse(run.out).at("stages").at(0).at("activations_bytes").get<double>();
  };
  EXPECT_LT(activations(experts_json), activations(attention));
  const CommandResult without_selective = strata(
      "simulate --model mixtral-8x7b --cluster dgx-h100:1 --tp 2 --sequence-parallel "
      "--ep 4 --global-batch 16 --recompute-modules moe_act");
  EXPECT_EQ(without_selective.exit_code, 1);
  EXPECT_EQ(without_selective.err,
            "strata: command line: /recompute/modules: only granularity \"selective\" recomputes "
            "modules (granularity is \"none\")\n");
  EXPECT_EQ(strata(knobs + "--recompute-modules moe").exit_code, 2);
}

// GPT-2 350M at tp 8, one sequence per micro-batch: host-bound under Megatron-LM's eager issue;
// CUDA graphs of the attention and MLP blocks take most of the issue away.
TEST(CliSimulate, CudaGraphScopesShortenAHostBoundStep) {
  const std::string knobs =
      "simulate --model gpt2-350m --cluster dgx-a100-80gb:1 --tp 8 --sequence-parallel "
      "--global-batch 8 --seq-len 1024 --framework megatron-lm --format json ";
  const CommandResult eager = strata(knobs);
  const CommandResult graphed = strata(knobs + "--cuda-graph-scope attn,mlp");
  ASSERT_EQ(eager.exit_code, 0) << eager.err;
  ASSERT_EQ(graphed.exit_code, 0) << graphed.err;
  const auto metric = [](const CommandResult& run, const char* key) {
    return nlohmann::json::parse(run.out).at(key).get<double>();
  };
  EXPECT_LT(metric(graphed, "step_time_s"), metric(eager, "step_time_s"));
  const CommandResult deepspeed = strata(
      "simulate --model gpt2-350m --cluster dgx-a100-80gb:1 --global-batch 8 "
      "--framework deepspeed --cuda-graph-scope attn");
  EXPECT_EQ(deepspeed.exit_code, 1);
  EXPECT_EQ(deepspeed.err,
            "strata: command line: /cuda_graph_scope: deepspeed does not capture CUDA graph "
            "scopes (Megatron-Core does: framework megatron-lm or nemo)\n");
  EXPECT_EQ(strata(knobs + "--cuda-graph-scope everything").exit_code, 2);
}

TEST(CliValidateSim, SimulatesRunsOnPartOfANode) {
  // The sample's first row (1.7B on 32 A100s, dp 32) moved to 2 GPUs of one node (dp 2) and to
  // 4 GPUs on each of 2 nodes (dp 8), with the global batch scaled to keep 16 micro-batches each.
  std::ifstream sample(fixture("validation/published_runs_sample.jsonl"));
  std::string line;
  std::getline(sample, line);
  const nlohmann::json row = nlohmann::json::parse(line);
  const auto moved = [&](const std::string& id, int gpus, int per_node) {
    nlohmann::json copy = row;
    copy["id"] = id;
    copy["system"]["num_gpus"] = gpus;
    copy["system"]["gpus_per_node"] = per_node;
    copy["parallel"]["dp"] = gpus;
    copy["parallel"]["global_batch_size"] = 16 * gpus;
    return copy.dump() + "\n";
  };
  const std::filesystem::path directory = std::filesystem::path(::testing::TempDir()) /
                                          ("strata-partial-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  std::ofstream(directory / "partial.jsonl")
      << moved("two-of-a-node", 2, 8) << moved("four-on-each-of-two", 8, 4);
  std::ofstream(directory / "bad.jsonl") << moved("twelve-per-node", 24, 12);

  const CommandResult run =
      strata("validate-sim --format json " + (directory / "partial.jsonl").string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json runs = nlohmann::json::parse(run.out).at("runs");
  ASSERT_EQ(runs.size(), 2u);
  // The same work per GPU: about the same time, the 8-GPU run's all-reduce crossing InfiniBand.
  const double pair = runs.at(0).at("predicted_step_time_s").get<double>();
  const double spread = runs.at(1).at("predicted_step_time_s").get<double>();
  EXPECT_GT(pair, 0);
  EXPECT_GE(spread, pair);
  EXPECT_LT(spread, 1.5 * pair);

  const CommandResult refused = strata("validate-sim " + (directory / "bad.jsonl").string());
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(lines(refused.err), 1u);
  EXPECT_THAT(refused.err, HasSubstr("bad.jsonl:1: /system/gpus_per_node: 12 is more than the "
                                     "dgx-a100-80gb node's 8"));
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace strata::tools

namespace strata::tools {
namespace {

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
// executor runs, so a model it does not build gets none; another stack's are for simulation.
TEST(CliPlan, AModelTheExecutorDoesNotBuildGetsNoStrataPlanAndSaysWhy) {
  const CommandResult strata_plans =
      strata("plan --model bloom-176b --cluster dgx-h100 --global-batch 64 --seq-len 2048");
  EXPECT_EQ(strata_plans.exit_code, 1);
  EXPECT_EQ(lines(strata_plans.err), 1u);
  EXPECT_THAT(strata_plans.err,
              HasSubstr("strata: no plan runs: strata's executor does not run these plans "
                        "(/model/position_embedding: the executor builds learned or rope "
                        "positions, not alibi)"));
  EXPECT_THAT(strata_plans.out, HasSubstr("No plan runs:"));
  const CommandResult other_stack = strata(
      "plan --model bloom-176b --cluster dgx-h100 --global-batch 64 --seq-len 2048 "
      "--framework megatron-deepspeed");
  EXPECT_THAT(other_stack.out, HasSubstr("as megatron-deepspeed runs it (simulation only"));
  EXPECT_THAT(other_stack.err, HasSubstr("no plan fits: memory for model states"));
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
