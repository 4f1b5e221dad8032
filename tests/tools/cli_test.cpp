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
  EXPECT_THAT(table.out, HasSubstr("682,636,487,424 parameters"));
  EXPECT_THAT(table.out, HasSubstr("256 routed experts, 8 per token, 1 shared on 58 of 61 layers"));
  EXPECT_THAT(table.out, HasSubstr("mlp (3 dense layers)"));
  EXPECT_THAT(table.out, HasSubstr("routed experts (58 MoE layers × 256)"));
  // Its multi-token-prediction module: trained once, stored with its embedding and head copies.
  EXPECT_THAT(table.out, HasSubstr("Multi-token prediction: 1 module after the main model (loss "
                                   "weight 0.1), 11,610,068,224 parameters; 13,463,426,304"));
  EXPECT_THAT(table.out, HasSubstr("multi-token prediction (1 module)"));
}

// describe names the architecture's features and whether strata's executor trains the model;
// --shrink describes (and --write-model writes) a tiny copy with the same features.
TEST(Cli, DescribeNamesTheFeaturesAndWhetherTheExecutorTrainsThem) {
  const CommandResult bloom = strata("describe --model bloom-176b");
  ASSERT_EQ(bloom.exit_code, 0) << bloom.err;
  EXPECT_THAT(bloom.out,
              HasSubstr("Architecture: multi-head attention, ALiBi, LayerNorm, GELU MLP, "
                        "embedding norm, tied embeddings"));
  EXPECT_THAT(bloom.out, HasSubstr("Strata's executor trains it"));
  const CommandResult deepseek = strata("describe --model deepseek-v3 --format json");
  ASSERT_EQ(deepseek.exit_code, 0) << deepseek.err;
  const nlohmann::json described = nlohmann::json::parse(deepseek.out);
  EXPECT_TRUE(described.at("executor").at("trains").get<bool>());
  EXPECT_EQ(described.at("features").front(), "multi-head latent attention");
  EXPECT_EQ(described.at("features").back(), "multi-token prediction: 1 module, loss weight 0.1");
  EXPECT_EQ(described.at("mtp").at("parameters"), 11'610'068'224LL);
  EXPECT_EQ(described.at("mtp").at("checkpoint_parameters"), 13'463'426'304LL);
  EXPECT_EQ(described.at("parameters_by_component").at("mtp"), 11'610'068'224LL);

  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / "qwen3-shrunk-cli.json";
  const CommandResult shrunk = strata(
      "describe --model qwen3-30b-a3b --shrink --format json "
      "--write-model " +
      file.string());
  ASSERT_EQ(shrunk.exit_code, 0) << shrunk.err;
  const nlohmann::json report = nlohmann::json::parse(shrunk.out);
  EXPECT_EQ(report.at("model"), "qwen3-30b-a3b-shrunk");
  EXPECT_LT(report.at("parameters").get<std::int64_t>(), 100'000);
  EXPECT_EQ(report.at("features"), (nlohmann::json{"grouped-query attention (2 kv heads)",
                                                   "rotary positions (theta 1e+06)", "RMSNorm",
                                                   "SwiGLU MLP", "query/key norm"}));
  // The file written is the model described: describe reads it back to the same count.
  const CommandResult again = strata("describe --format json --model " + file.string());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out).at("parameters"), report.at("parameters"));
  std::filesystem::remove(file);
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
  // 24 dense published models, 8 mixtures of experts, gpt-tiny, llama-tiny and moe-tiny.
  EXPECT_EQ(listing.at("models").size(), 35u);
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
