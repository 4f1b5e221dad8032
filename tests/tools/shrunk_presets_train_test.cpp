// Every built-in model trains: the tiny copy of each preset (`strata describe --shrink
// --write-model`, the same features at sizes that train in a second) and the dense-features
// fixture (ALiBi over 6 heads, LayerNorm query/key norms, an embedding norm, squared-ReLU MLPs and
// experts), the moe-expert-bias-groups fixture (DeepSeek-V3's router: an expert bias moved by
// auxiliary-loss-free balancing, group-limited routing), the window-features fixture (sliding
// windows with ALiBi, attention sinks, clamped SwiGLU experts, a router logit bias) and the
// mtp-features fixture (two multi-token-prediction modules on a GPT; DeepSeek-V3's copy has its
// own module, on an untied, rope, MoE model) run 10 steps of
// `strata train` on one rank and under mpirun in tensor parallelism with and (dense models) without
// sequence parallelism, context parallelism (ring and all-gather), a 1F1B pipeline and data
// parallelism with ZeRO-3 — and mixtures of experts in expert parallelism, alone and with expert
// tensor parallelism — each logging the one-rank run's losses and gradient norms within 1e-5. A
// checkpoint of one layout resumes on another. The executor refuses no preset (describe says). The
// PyTorch side of the same copies is tests/reference/torch_reference.py (test torch_reference).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "strata_under_mpirun.h"
#include "train_log_records.h"

namespace {

namespace fs = std::filesystem;
using strata::testing::CommandResult;
using strata::testing::expect_same_steps;
using strata::testing::step_records;
using strata::testing::strata;

// A model file to train and what the tests need to know of it.
struct TrainedModel {
  std::string name;  // the first preset (in the listing's order) with this tiny copy
  fs::path file;
  bool moe = false;
};

struct ShrunkPresets : strata::testing::MpiCliTest {
  ShrunkPresets() : MpiCliTest("shrunk-presets") {}

  void SetUp() override {
    MpiCliTest::SetUp();
    if (IsSkipped()) return;
    const CommandResult listing = strata("presets --format json");
    ASSERT_EQ(listing.exit_code, 0) << listing.err;
    // Copies equal but for their names (the GPT-3 family shrinks to one model) train once.
    std::set<std::string> seen;
    const nlohmann::json presets = nlohmann::json::parse(listing.out);
    for (const nlohmann::json& preset : presets.at("models")) {
      const std::string name = preset.at("name").get<std::string>();
      const fs::path file = directory / (name + "-shrunk.json");
      const CommandResult described = strata(
          "describe --model " + name + " --shrink --format json --write-model " + file.string());
      ASSERT_EQ(described.exit_code, 0) << name << ": " << described.err;
      const nlohmann::json executor = nlohmann::json::parse(described.out).at("executor");
      if (!executor.at("trains").get<bool>()) {
        refused[name] = executor.at("json_path").get<std::string>();
        continue;
      }
      nlohmann::json model = nlohmann::json::parse(strata::testing::slurp(file));
      model.erase("name");
      model.erase("description");
      if (seen.insert(model.dump()).second) {
        models.push_back({name, file, model.contains("moe")});
      }
    }
    // DeepSeek-V3's router (until its preset trains): sigmoid scores, an expert bias that
    // every rank moves alike after each step, group-limited choices.
    models.push_back({"moe-expert-bias-groups",
                      fs::path(STRATA_FIXTURES_DIR) / "executor" / "moe-expert-bias-groups.json",
                      true});
    models.push_back({"dense-features",
                      fs::path(STRATA_FIXTURES_DIR) / "executor" / "dense-features.json", true});
    models.push_back({"window-features",
                      fs::path(STRATA_FIXTURES_DIR) / "executor" / "window-features.json", true});
    models.push_back(
        {"mtp-features", fs::path(STRATA_FIXTURES_DIR) / "executor" / "mtp-features.json", false});
  }

  // 4 sequences of 32 tokens per step in micro-batches of 2.
  std::string train(const TrainedModel& model, const std::string& extra) const {
    return "train --model " + model.file.string() + " --data " + tokens +
           " --micro-batch 2 --global-batch 4 --seq-len 32 --log-format json " + extra;
  }

  enum class Kind { all, dense, moe };
  // Each model of `kind`'s one-rank run, then each layout (ranks, flags) of `layouts` under
  // mpirun held to it.
  void expect_layouts_match_one_rank(const std::vector<std::pair<int, std::string>>& layouts,
                                     Kind kind = Kind::all) {
    for (const TrainedModel& model : models) {
      if ((kind == Kind::moe && !model.moe) || (kind == Kind::dense && model.moe)) continue;
      const CommandResult one = strata(train(model, "--steps 10"));
      ASSERT_EQ(one.exit_code, 0) << model.name << ": " << one.err;
      const std::vector<nlohmann::json> expected = step_records(one.out);
      ASSERT_EQ(expected.size(), 10u) << model.name;
      for (const auto& [ranks, layout] : layouts) {
        expect_same_steps(expected, mpirun(ranks, train(model, "--steps 10 " + layout)), 0,
                          model.name + " " + layout);
      }
    }
  }

  std::vector<TrainedModel> models;
  std::map<std::string, std::string> refused;  // preset → the field describe names
};

TEST_F(ShrunkPresets, TheExecutorRefusesNoPreset) {
  // Every preset trains (README's model table says the same).
  EXPECT_EQ(refused, (std::map<std::string, std::string>{}));
  EXPECT_GE(models.size(), 10u);
}

TEST_F(ShrunkPresets, TensorAndContextParallelRunsLogTheOneRankSteps) {
  expect_layouts_match_one_rank(
      {{2, "--tp 2 --sequence-parallel"}, {2, "--cp 2"}, {2, "--cp 2 --cp-comm all_gather"}});
}

// Without sequence parallelism every tp rank holds all tokens, so only the query/key norms'
// gains, which each rank feeds from its own heads, are partial sums over tp (a mixture of experts
// needs sequence parallelism under tp).
TEST_F(ShrunkPresets, TensorParallelRunsWithoutSequenceParallelismLogTheOneRankSteps) {
  expect_layouts_match_one_rank({{2, "--tp 2"}}, Kind::dense);
}

TEST_F(ShrunkPresets, PipelineAndShardedDataParallelRunsLogTheOneRankSteps) {
  expect_layouts_match_one_rank({{2, "--pp 2 --schedule 1f1b"}, {2, "--dp 2 --zero 3"}});
}

TEST_F(ShrunkPresets, ExpertParallelRunsLogTheOneRankSteps) {
  // ep 2 over the dp pair; ep 2 × etp 2 over tp 2 · dp 2 (each expert's width split in two).
  expect_layouts_match_one_rank({{2, "--ep 2"}, {4, "--tp 2 --sequence-parallel --ep 2 --etp 2"}},
                                Kind::moe);
}

// The dense-features model, 4 steps of dp 2 at ZeRO-3 checkpointed at step 2, resumed from it in
// tp 2 with sequence parallelism: steps 3 and 4 are the dp run's (the query/key norms' gains and
// the embedding norm reshard with the rest).
TEST_F(ShrunkPresets, ACheckpointOfOneLayoutResumesOnAnother) {
  const TrainedModel& model = models.back();
  const fs::path sharded = directory / "dp2";
  const CommandResult first =
      mpirun(2, train(model, "--dp 2 --zero 3 --steps 4 --checkpoint-every 2 --checkpoint-dir " +
                                 sharded.string()));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::vector<nlohmann::json> expected = step_records(first.out);
  ASSERT_EQ(expected.size(), 4u);
  const fs::path resumed = directory / "tp2";
  fs::create_directories(resumed);
  fs::copy(sharded / "step_00000002", resumed / "step_00000002", fs::copy_options::recursive);
  expect_same_steps(expected,
                    mpirun(2, train(model,
                                    "--tp 2 --sequence-parallel --steps 4 --resume "
                                    "--checkpoint-dir " +
                                        resumed.string())),
                    2, "dp2 ZeRO-3 → tp2 sp");
}

}  // namespace
