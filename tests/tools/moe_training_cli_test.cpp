// `strata train` of a mixture-of-experts model (the moe-tiny preset: 8 experts, top-2, a shared
// expert, a dense first layer, load-balancing and z-losses) on one rank and under mpirun, in the
// layouts the executor runs MoE in: data parallelism with ZeRO-1 and ZeRO-3, a 1F1B pipeline,
// context parallelism, tensor parallelism with sequence parallelism, expert tensor parallelism,
// and expert parallelism (the
// routed experts split over ep ranks, tokens sent to them by all-to-all) alone, with expert data
// parallelism, with a pipeline, over the cp group and with ZeRO 1 to 3 (the experts' state sharded
// over the ranks holding the same experts). Each must log the one-rank run's losses and gradient
// norms for 10 steps within 1e-5; the router losses are in every gradient, so a layout that weighed
// them wrongly would drift. A resume on another layout continues the run (expert-parallel
// checkpoints too); tensor parallelism without sequence parallelism is refused with the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "strata_under_mpirun.h"
#include "train_log_records.h"

namespace {

namespace fs = std::filesystem;
using strata::testing::CommandResult;
using strata::testing::expect_same_steps;
using strata::testing::step_records;
using strata::testing::strata;
using strata::testing::strata_under_mpirun;
using strata::testing::use_mpi_test_environment;
using ::testing::HasSubstr;

struct MoeTrainingCli : strata::testing::MpiCliTest {
  MoeTrainingCli() : MpiCliTest("moe-cli") {}

  // 4 sequences of 32 tokens per step, in micro-batches of 2 (of 1 where 4 ranks read them).
  std::string train(const std::string& extra, int micro_batch = 2) const {
    return "train --model moe-tiny --data " + tokens + " --micro-batch " +
           std::to_string(micro_batch) + " --global-batch 4 --seq-len 32 --log-format json " +
           extra;
  }
  // A 4-step run of `layout` on `ranks` ranks that checkpoints at step 2 into `into`: its step
  // records (a failure, and fewer than 4, if it did not run).
  std::vector<nlohmann::json> checkpointed_run(int ranks, const std::string& layout,
                                               const fs::path& into, int micro_batch = 2) const {
    const CommandResult run = strata_under_mpirun(
        ranks,
        train(layout + " --steps 4 --checkpoint-every 2 --checkpoint-dir " + into.string(),
              micro_batch),
        directory);
    EXPECT_EQ(run.exit_code, 0) << layout << ": " << run.err;
    return step_records(run.out);
  }
  // Flags that resume a 4-step run from a copy of `checkpoint` in a directory of its own.
  std::string resumed_from(const fs::path& checkpoint, const std::string& name) const {
    const fs::path resumed = directory / name;
    fs::create_directories(resumed);
    fs::copy(checkpoint, resumed / checkpoint.filename(), fs::copy_options::recursive);
    return " --steps 4 --resume --checkpoint-dir " + resumed.string();
  }
};

TEST_F(MoeTrainingCli, DataParallelAndPipelineRunsLogTheSingleRankSteps) {
  const CommandResult one = strata(train("--steps 10"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  ASSERT_EQ(expected.size(), 10u) << one.out;
  // The loss falls: the router and the experts learn.
  EXPECT_LT(expected.back().at("loss").get<double>(), expected.front().at("loss").get<double>());
  for (const char* layout : {"--dp 2 --zero 1", "--dp 2 --zero 3", "--pp 2 --schedule 1f1b"}) {
    expect_same_steps(expected,
                      strata_under_mpirun(2, train(std::string("--steps 10 ") + layout), directory),
                      0, layout);
  }
}

// ep 2 on 2 ranks (each holds 4 of the 8 experts, no expert replicas), ep 4 on 4 (2 experts a
// rank), ep 2 on 4 ranks (every expert on two ranks, which sum its gradients), and ep 2 on each
// stage of a 1F1B pipeline; with ZeRO: ep 2 at ZeRO-3 (the dense state sharded over 2, the
// experts' over 1), ep 4 at ZeRO-1 over dp 4, ep 2 over dp 4 at ZeRO 1, 2 and 3 (each expert's
// state sharded over its two holders) and at ZeRO-3 in hybrid shards of 2. The router's
// load-balancing loss is a statistic of each micro-batch's tokens, so the one-rank run a layout is
// held to has the layout's micro-batches.
TEST_F(MoeTrainingCli, ExpertParallelRunsLogTheSingleRankSteps) {
  for (const int micro_batch : {2, 1}) {
    const CommandResult one = strata(train("--steps 10", micro_batch));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const std::vector<nlohmann::json> expected = step_records(one.out);
    ASSERT_EQ(expected.size(), 10u) << one.out;
    const std::vector<std::pair<int, std::string>> layouts =
        micro_batch == 2
            ? std::vector<std::pair<int, std::string>>{{2, "--ep 2"},
                                                       {4, "--dp 2 --ep 2 --pp 2"},
                                                       {2, "--ep 2 --zero 3"}}
            : std::vector<std::pair<int, std::string>>{{4, "--ep 4"},
                                                       {4, "--dp 4 --ep 2"},
                                                       {4, "--dp 4 --ep 4 --zero 1"},
                                                       {4, "--dp 4 --ep 2 --zero 1"},
                                                       {4, "--dp 4 --ep 2 --zero 2"},
                                                       {4, "--dp 4 --ep 2 --zero 3"},
                                                       {4, "--dp 4 --ep 2 --zero 3 --dp-shard 2"}};
    for (const auto& [ranks, layout] : layouts) {
      expect_same_steps(
          expected,
          strata_under_mpirun(ranks, train("--steps 10 " + layout, micro_batch), directory), 0,
          layout);
    }
  }
}

// Context parallelism: each rank routes its chunks' tokens, and the cp group pools the choices
// the load-balancing loss counts — cp 2 alone and with the all-gather attention, cp 2 with the
// experts split over the cp pair, and dp 2 × cp 2 with ep 4 at ZeRO-1 (every rank its own two
// experts, the dense state sharded over all four).
TEST_F(MoeTrainingCli, ContextParallelRunsLogTheSingleRankSteps) {
  const CommandResult one = strata(train("--steps 10"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  ASSERT_EQ(expected.size(), 10u) << one.out;
  for (const auto& [ranks, layout] :
       std::vector<std::pair<int, std::string>>{{2, "--cp 2"},
                                                {2, "--cp 2 --cp-comm all_gather"},
                                                {2, "--cp 2 --ep 2"},
                                                {4, "--dp 2 --cp 2 --ep 4 --zero 1"}}) {
    expect_same_steps(
        expected, strata_under_mpirun(ranks, train("--steps 10 " + layout), directory), 0, layout);
  }
}

TEST_F(MoeTrainingCli, ACheckpointOfOneLayoutResumesOnAnother) {
  // 4 steps of dp2 ZeRO-3, checkpointed at 2; resumed from step 2 as a 1F1B pipeline: steps 3
  // and 4 are the dp run's (the experts' stacked weights and their optimizer state reshard).
  const fs::path sharded = directory / "dp2";
  const std::vector<nlohmann::json> expected = checkpointed_run(2, "--dp 2 --zero 3", sharded);
  ASSERT_EQ(expected.size(), 4u);
  const fs::path pipelined = directory / "pp2";
  fs::create_directories(pipelined);
  fs::copy(sharded / "step_00000002", pipelined / "step_00000002", fs::copy_options::recursive);
  expect_same_steps(
      expected,
      strata_under_mpirun(
          2, train("--pp 2 --steps 4 --resume --checkpoint-dir " + pipelined.string()), directory),
      2, "dp2 ZeRO-3 → pp2");
}

// The buckets a mixture of experts trains are the buckets the simulator prices (the two
// runs, which drifted apart): on dp 2 the routed experts share the dense buckets (one bucket, where
// the cost model used to price two); on ep 2 with ZeRO-1 and buckets of 30,000 elements each MoE
// layer's routed experts are cut into buckets of their own.
TEST_F(MoeTrainingCli, TheBucketsTrainedAreTheBucketsSimulated) {
  for (const std::string layout : {"--dp 2", "--ep 2 --zero 1 --bucket-size 30000"}) {
    const CommandResult run = strata_under_mpirun(2, train("--steps 1 " + layout), directory);
    ASSERT_EQ(run.exit_code, 0) << layout << ": " << run.err;
    nlohmann::json summary;
    std::istringstream lines(run.out);
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (record.contains("summary")) summary = record;
    }
    ASSERT_TRUE(summary.contains("gradient_buckets")) << layout << ": " << run.out;
    EXPECT_EQ(summary.at("gradient_buckets"), summary.at("predicted_gradient_buckets")) << layout;
  }
}

TEST_F(MoeTrainingCli, TensorParallelismWithoutSequenceParallelismIsRefusedWithTheField) {
  // The refusal comes before the world size is compared: one process is enough to see it.
  const CommandResult without_sequence_parallel = strata(train("--tp 2 --steps 1"));
  EXPECT_EQ(without_sequence_parallel.exit_code, 1);
  EXPECT_THAT(without_sequence_parallel.err,
              HasSubstr("/sequence_parallel: a mixture-of-experts model with tp=2 needs "
                        "sequence parallelism"));
}

// Tensor parallelism with sequence parallelism: each tp rank routes its own shard of the
// micro-batch's tokens, the shared experts are split over tp as a dense MLP, and the routed
// experts are whole — on every rank (tp 2), split over the tp pair (tp 2 · ep 2), folded over tp
// and dp (tp 2 · dp 2 with ep 2 and ep 4, at ZeRO 0 to 3), over tp 4 (ep 2: each expert on two
// tp ranks, which sum its gradients), under a 1F1B pipeline and with cp. The tp and cp groups pool
// the load-balancing statistic.
TEST_F(MoeTrainingCli, TensorParallelRunsLogTheSingleRankSteps) {
  const CommandResult one = strata(train("--steps 10"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  ASSERT_EQ(expected.size(), 10u) << one.out;
  const std::string sp = "--sequence-parallel ";
  for (const auto& [ranks, layout] :
       std::vector<std::pair<int, std::string>>{{2, "--tp 2 " + sp},
                                                {2, "--tp 2 --ep 2 " + sp},
                                                {4, "--tp 2 --dp 2 --ep 2 " + sp},
                                                {4, "--tp 2 --dp 2 --ep 4 --zero 1 " + sp},
                                                {4, "--tp 2 --dp 2 --ep 2 --zero 3 " + sp},
                                                {4, "--tp 4 --ep 2 " + sp},
                                                {4, "--tp 2 --pp 2 --ep 2 --schedule 1f1b " + sp},
                                                {4, "--tp 2 --cp 2 --ep 4 " + sp}}) {
    expect_same_steps(
        expected, strata_under_mpirun(ranks, train("--steps 10 " + layout), directory), 0, layout);
  }
}

// A tp 4 · ep 2 checkpoint at ZeRO-1: the ep pairs fold over tp ranks, so each of the four tp
// slices of the dense state is written by its own rank beside its experts (one values file per
// tp rank; the moments sharded over the two holders of each expert). It resumes on itself, on
// tp 2 · dp 2 · ep 2 at ZeRO-3 and on one rank; a one-rank checkpoint resumes on tp 2 · ep 2.
TEST_F(MoeTrainingCli, TensorParallelExpertCheckpointsResumeOnAnyLayout) {
  const std::string layout = "--tp 4 --ep 2 --zero 1 --sequence-parallel";
  const fs::path original = directory / "tp4-ep2";
  const std::vector<nlohmann::json> expected = checkpointed_run(4, layout, original);
  ASSERT_EQ(expected.size(), 4u);
  for (const std::string file :
       {"model.tp0.pp0.ep0.bin", "model.tp1.pp0.ep1.bin", "model.tp2.pp0.ep0.bin",
        "model.tp3.pp0.ep1.bin", "optimizer.tp0.pp0.ep0.dp0.edp0.bin",
        "optimizer.tp1.pp0.ep1.dp0.edp0.bin", "optimizer.tp2.pp0.ep0.dp0.edp1.bin",
        "optimizer.tp3.pp0.ep1.dp0.edp1.bin"}) {
    EXPECT_TRUE(fs::exists(original / "step_00000002" / file)) << file;
  }
  const auto resumed_from_step_2 = [&](const std::string& name) {
    return resumed_from(original / "step_00000002", name);
  };
  expect_same_steps(expected,
                    strata_under_mpirun(4, train(layout + resumed_from_step_2("same")), directory),
                    2, "tp 4 · ep 2 → the same");
  expect_same_steps(
      expected,
      strata_under_mpirun(
          4, train("--tp 2 --dp 2 --ep 2 --zero 3 --sequence-parallel" + resumed_from_step_2("z3")),
          directory),
      2, "tp 4 · ep 2 → tp 2 · dp 2 · ep 2 ZeRO-3");
  expect_same_steps(expected, strata(train(resumed_from_step_2("one").substr(1))), 2,
                    "tp 4 · ep 2 → one rank");
  const fs::path single = directory / "single";
  const CommandResult one =
      strata(train("--steps 4 --checkpoint-every 2 --checkpoint-dir " + single.string()));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  expect_same_steps(step_records(one.out),
                    strata_under_mpirun(2,
                                        train("--tp 2 --ep 2 --sequence-parallel" +
                                              resumed_from(single / "step_00000002", "to-tp2")),
                                        directory),
                    2, "one rank → tp 2 · ep 2");
}

// Expert tensor parallelism: each expert's width split over etp ranks holding the same experts,
// which gather each other's dispatched rows and add each other's partial outputs — etp 2 alone,
// with ep 2 (each expert a quarter of the ranks' work), at ZeRO-3, with tp 2 and sequence
// parallelism (etp over the tp pair) and on each stage of a 1F1B pipeline.
TEST_F(MoeTrainingCli, ExpertTensorParallelRunsLogTheSingleRankSteps) {
  const CommandResult one = strata(train("--steps 10", 1));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<nlohmann::json> expected = step_records(one.out);
  ASSERT_EQ(expected.size(), 10u) << one.out;
  for (const auto& [ranks, layout] : std::vector<std::pair<int, std::string>>{
           {2, "--etp 2"},
           {4, "--ep 2 --etp 2"},
           {4, "--ep 2 --etp 2 --zero 3"},
           {4, "--tp 2 --dp 2 --ep 2 --etp 2 --sequence-parallel"},
           {4, "--tp 2 --pp 2 --etp 2 --schedule 1f1b --sequence-parallel"}}) {
    expect_same_steps(expected,
                      strata_under_mpirun(ranks, train("--steps 10 " + layout, 1), directory), 0,
                      layout);
  }
}

// An ep 2 · etp 2 ZeRO-3 checkpoint: one file of values and one of moments per (ep, etp) rank,
// named by both, resumed on itself, on ep 4, on etp 2 at ZeRO-1 and on one rank.
TEST_F(MoeTrainingCli, ExpertTensorParallelCheckpointsResumeOnAnyLayout) {
  const fs::path original = directory / "ep2-etp2";
  const std::vector<nlohmann::json> expected =
      checkpointed_run(4, "--ep 2 --etp 2 --zero 3", original, 1);
  ASSERT_EQ(expected.size(), 4u);
  // Rank r holds experts ep r / 2, etp r % 2 (the expert mesh folds etp fastest) and dense
  // shard r of dp 4; each (ep, etp) pair has one expert shard.
  for (const char* kind : {"model", "optimizer"}) {
    for (const char* file : {".tp0.pp0.ep0.etp0.dp0.edp0.bin", ".tp0.pp0.ep0.etp1.dp1.edp0.bin",
                             ".tp0.pp0.ep1.etp0.dp2.edp0.bin", ".tp0.pp0.ep1.etp1.dp3.edp0.bin"}) {
      EXPECT_TRUE(fs::exists(original / "step_00000002" / (kind + std::string(file)))) << file;
    }
  }
  const auto resumed_from_step_2 = [&](const std::string& name) {
    return resumed_from(original / "step_00000002", name);
  };
  for (const auto& [ranks, layout, name] : std::vector<std::tuple<int, std::string, std::string>>{
           {4, "--ep 2 --etp 2 --zero 3", "same"},
           {4, "--ep 4", "ep4"},
           {2, "--etp 2 --zero 1", "etp2"}}) {
    expect_same_steps(
        expected,
        strata_under_mpirun(ranks, train(layout + resumed_from_step_2(name), 1), directory), 2,
        "ep 2 · etp 2 ZeRO-3 → " + layout);
  }
  expect_same_steps(expected, strata(train(resumed_from_step_2("one").substr(1), 1)), 2,
                    "ep 2 · etp 2 ZeRO-3 → one rank");
}

// An expert-parallel checkpoint (one file per ep rank, written by the first of the ranks that
// hold those experts) resumes on its own layout, on another ep and on one rank: steps 3 and 4 are
// the first run's.
TEST_F(MoeTrainingCli, ExpertParallelCheckpointsResumeOnAnyLayout) {
  const fs::path original = directory / "dp4-ep2";
  const std::vector<nlohmann::json> expected = checkpointed_run(4, "--dp 4 --ep 2", original, 1);
  ASSERT_EQ(expected.size(), 4u);
  for (const std::string file : {"model.tp0.pp0.ep0.bin", "model.tp0.pp0.ep1.bin",
                                 "optimizer.tp0.pp0.ep0.bin", "optimizer.tp0.pp0.ep1.bin"}) {
    EXPECT_TRUE(fs::exists(original / "step_00000002" / file)) << file;
  }
  const auto resumed_from_step_2 = [&](const std::string& name) {
    return resumed_from(original / "step_00000002", name);
  };
  expect_same_steps(
      expected,
      strata_under_mpirun(4, train("--dp 4 --ep 2" + resumed_from_step_2("same"), 1), directory), 2,
      "dp 4 · ep 2 → the same");
  expect_same_steps(
      expected,
      strata_under_mpirun(4, train("--dp 4 --ep 4" + resumed_from_step_2("ep4"), 1), directory), 2,
      "dp 4 · ep 2 → dp 4 · ep 4");
  expect_same_steps(expected, strata(train(resumed_from_step_2("one").substr(1), 1)), 2,
                    "dp 4 · ep 2 → one rank");
}

// A ZeRO-3 expert-parallel checkpoint: per ep rank, one file of values and one of moments for
// each pair of dense and expert shards (named by both, written by each rank here),
// resumed on its own layout, on ep 4 at ZeRO-1, on whole state (ep 2, ZeRO-0) and on one rank.
TEST_F(MoeTrainingCli, ShardedExpertCheckpointsResumeOnAnyLayout) {
  const fs::path original = directory / "dp4-ep2-zero3";
  const std::vector<nlohmann::json> expected =
      checkpointed_run(4, "--dp 4 --ep 2 --zero 3", original, 1);
  ASSERT_EQ(expected.size(), 4u);
  // Rank r holds experts ep r % 2, expert shard r / 2 and dense shard r.
  for (const char* kind : {"model", "optimizer"}) {
    for (int rank = 0; rank < 4; ++rank) {
      const std::string file = std::string(kind) + ".tp0.pp0.ep" + std::to_string(rank % 2) +
                               ".dp" + std::to_string(rank) + ".edp" + std::to_string(rank / 2) +
                               ".bin";
      EXPECT_TRUE(fs::exists(original / "step_00000002" / file)) << file;
    }
  }
  const auto resumed_from_step_2 = [&](const std::string& name) {
    return resumed_from(original / "step_00000002", name);
  };
  for (const auto& [layout, name] :
       std::vector<std::pair<std::string, std::string>>{{"--dp 4 --ep 2 --zero 3", "same"},
                                                        {"--dp 4 --ep 4 --zero 1", "ep4-zero1"},
                                                        {"--dp 4 --ep 2", "ep2-zero0"}}) {
    expect_same_steps(
        expected, strata_under_mpirun(4, train(layout + resumed_from_step_2(name), 1), directory),
        2, "dp 4 · ep 2 ZeRO-3 → " + layout);
  }
  expect_same_steps(expected, strata(train(resumed_from_step_2("one").substr(1), 1)), 2,
                    "dp 4 · ep 2 ZeRO-3 → one rank");
}

}  // namespace
