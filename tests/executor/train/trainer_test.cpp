// The training loop: gradient accumulation, resume, and the plans it refuses.
#include "strata/executor/train/trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "executor_models.h"
#include "input_error_message.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

schemas::ModelConfig micro_model(double dropout) { return testing::micro_gpt(64, dropout); }

schemas::Plan plan_for(const schemas::ModelConfig& model, std::int64_t micro_batch,
                       std::int64_t global_batch) {
  schemas::PlanKnobs knobs;
  knobs.seq_length = 8;
  knobs.micro_batch_size = micro_batch;
  knobs.global_batch_size = global_batch;
  knobs.recompute = schemas::RecomputeGranularity::none;
  knobs.precision = schemas::Dtype::fp32;
  return schemas::build_plan(model, schemas::cluster_preset("cpu-local"), knobs, "test");
}

TokenFile pattern_tokens() {
  TokenFile file{"pattern.bin", {}};
  for (int i = 0; i < 4000; ++i)
    file.tokens.push_back(static_cast<std::uint16_t>((i * i + 3 * i) % 61));
  return file;
}

std::vector<double> losses_of(Trainer& trainer) {
  std::vector<double> losses;
  trainer.run([&](const StepRecord& record) { losses.push_back(record.loss); });
  return losses;
}

TEST(Trainer, AccumulatingMicroBatchesEqualsOneMicroBatchOfTheGlobalBatch) {
  const TokenFile data = pattern_tokens();
  TrainingOptions options;
  options.steps = 3;
  options.learning_rate = 1e-2;
  const schemas::ModelConfig model = micro_model(0.1);
  Trainer accumulated(plan_for(model, 2, 8), "test", data, options);
  Trainer whole(plan_for(model, 8, 8), "test", data, options);
  const std::vector<double> accumulated_losses = losses_of(accumulated);
  const std::vector<double> whole_losses = losses_of(whole);
  for (std::size_t i = 0; i < whole_losses.size(); ++i) {
    EXPECT_NEAR(accumulated_losses[i], whole_losses[i], 1e-5) << "step " << i + 1;
  }
  const Tensor& a = accumulated.model().parameters().values();
  const Tensor& b = whole.model().parameters().values();
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5) << i;
  }
}

TEST(Trainer, ValidationReadsTheSameBatchesWithoutDropout) {
  const TokenFile data = pattern_tokens();
  TokenFile validation{"validation.bin", {}};
  for (int i = 0; i < 600; ++i) validation.tokens.push_back(static_cast<std::uint16_t>(i * 7 % 61));
  TrainingOptions options;
  options.steps = 2;
  options.eval_batches = 3;
  // The same initial weights (init does not depend on dropout), with and without dropout.
  Trainer with_dropout(plan_for(micro_model(0.3), 2, 8), "test", data, options);
  Trainer without(plan_for(micro_model(0.0), 2, 8), "test", data, options);
  with_dropout.set_validation_data(validation);
  without.set_validation_data(validation);
  const EvaluationRecord first = with_dropout.evaluate();
  EXPECT_EQ(first.step, 0);
  EXPECT_EQ(first.batches, 3);
  EXPECT_EQ(first.loss, without.evaluate().loss) << "dropout applied in evaluation";
  EXPECT_EQ(first.loss, with_dropout.evaluate().loss) << "evaluations read different batches";
  // 600 tokens hold 9 batches of 8 × 8 + 1: asking for 20 reads each once.
  options.eval_batches = 20;
  Trainer capped(plan_for(micro_model(0.0), 2, 8), "test", data, options);
  capped.set_validation_data(validation);
  EXPECT_EQ(capped.evaluate().batches, 9);
  // run() validates before the first step and after the last.
  std::vector<EvaluationRecord> evaluations;
  with_dropout.run([](const StepRecord&) {},
                   [&](const EvaluationRecord& record) { evaluations.push_back(record); });
  ASSERT_EQ(evaluations.size(), 2u);
  EXPECT_EQ(evaluations.front().step, 0);
  EXPECT_EQ(evaluations.back().step, 2);
  EXPECT_NE(evaluations.back().loss, evaluations.front().loss);
}

// A one-device run switching to another one-device plan (here: a micro-batch of 8 instead of 2)
// goes on with the losses of the run it would have been; a switch to a plan the job cannot run
// (another model; two ranks on a job of one) is refused naming the plan, and leaves the run whole.
TEST(Trainer, SwitchesPlanBetweenStepsAndRefusesAPlanTheJobCannotRun) {
  const TokenFile data = pattern_tokens();
  TrainingOptions options;
  options.steps = 4;
  options.learning_rate = 1e-2;
  const schemas::ModelConfig model = micro_model(0.0);
  Trainer straight(plan_for(model, 2, 8), "test", data, options);
  const std::vector<double> expected = losses_of(straight);
  TrainingOptions switching = options;
  switching.switches.push_back({2, plan_for(model, 8, 8), "whole micro-batch", "."});
  Trainer switched(plan_for(model, 2, 8), "test", data, switching);
  std::vector<double> got;
  const TrainingSummary summary =
      switched.run([&](const StepRecord& record) { got.push_back(record.loss); });
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-5 * expected[i]) << "step " << i + 1;
  }
  ASSERT_EQ(summary.switches.size(), 1u);
  EXPECT_EQ(summary.switches[0].most_sent_elements, 0);  // one rank: nothing to send
  EXPECT_EQ(switched.plan().batch.micro_batch_size, 8);

  Trainer refusing(plan_for(model, 2, 8), "test", data, options);
  schemas::Plan two_ranks = plan_for(model, 2, 8);
  two_ranks.mesh.dp = 2;
  EXPECT_THROW(refusing.switch_to(two_ranks, "two-ranks.json"), schemas::InputError);
  EXPECT_THROW(refusing.switch_to(plan_for(micro_model(0.2), 2, 8), "other.json"),
               schemas::InputError);
  const std::vector<double> after = losses_of(refusing);  // still trains, from step 1
  ASSERT_EQ(after.size(), expected.size());
  EXPECT_NEAR(after[0], expected[0], 1e-5 * expected[0]);
}

TEST(Trainer, RefusesValidationDataShorterThanAGlobalBatch) {
  const TokenFile data = pattern_tokens();
  const TokenFile validation{"short.bin", std::vector<std::uint16_t>(64, 1)};
  Trainer trainer(plan_for(micro_model(0.0), 2, 8), "test", data, TrainingOptions{});
  EXPECT_THAT(
      strata::testing::input_error_message([&] { trainer.set_validation_data(validation); }),
      HasSubstr("short.bin"));
}

TEST(Trainer, ResumingFromACheckpointGivesBitIdenticalLosses) {
  const TokenFile data = pattern_tokens();
  const fs::path directory =
      fs::path(::testing::TempDir()) / ("resume-" + std::to_string(::getpid()));
  fs::remove_all(directory);
  TrainingOptions options;
  options.steps = 6;
  options.warmup_steps = 2;
  options.learning_rate = 1e-2;
  options.checkpoint_dir = directory;
  options.checkpoint_every = 3;
  const schemas::Plan plan = plan_for(micro_model(0.1), 2, 4);
  Trainer uninterrupted(plan, "test", data, options);
  const std::vector<double> expected = losses_of(uninterrupted);
  ASSERT_EQ(expected.size(), 6u);
  // As if the run had died after step 3: only the step-3 checkpoint is left.
  fs::remove_all(directory / "step_00000006");
  options.resume = true;
  Trainer resumed(plan, "test", data, options);
  EXPECT_EQ(resumed.completed_steps(), 3);
  const std::vector<double> continued = losses_of(resumed);
  ASSERT_EQ(continued.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(continued[i], expected[3 + i]) << "step " << i + 4;
  EXPECT_EQ(0, std::memcmp(resumed.model().parameters().values().raw(),
                           uninterrupted.model().parameters().values().raw(),
                           uninterrupted.model().parameters().values().bytes()));
}

TEST(Trainer, RefusesPlansItCannotRunAsWritten) {
  const TokenFile data = pattern_tokens();
  const schemas::ModelConfig model = micro_model(0);
  schemas::PlanKnobs knobs;
  knobs.seq_length = 8;
  knobs.mesh.dp = 2;
  knobs.global_batch_size = 2;
  knobs.recompute = schemas::RecomputeGranularity::none;
  knobs.precision = schemas::Dtype::fp32;
  const schemas::Plan two_ranks =
      schemas::build_plan(model, schemas::cluster_preset("cpu-local:2"), knobs, "test");
  EXPECT_THAT(
      strata::testing::input_error_message([&] { Trainer(two_ranks, "plan.json", data, {}); }),
      HasSubstr("plan.json: /mesh: the plan runs on 2 ranks (tp 1 × cp 1 × dp 2 × pp 1); this "
                "job has 1 (start it with mpirun -np N)"));
  knobs.global_batch_size = 4;
  knobs.micro_batch_size = 1;
  knobs.mesh = schemas::Mesh{.tp = 2, .cp = 1, .dp = 1, .pp = 1};
  knobs.sequence_parallel = true;
  knobs.tp_comm_overlap = true;
  const schemas::Plan overlapped =
      schemas::build_plan(model, schemas::cluster_preset("cpu-local:2"), knobs, "test");
  EXPECT_THAT(
      strata::testing::input_error_message([&] { Trainer(overlapped, "plan.json", data, {}); }),
      HasSubstr("plan.json: /tp_comm_overlap: the executor runs tensor-parallel collectives "
                "between the GEMMs"));
  schemas::Plan deepspeed = plan_for(model, 1, 1);
  deepspeed.framework = schemas::TrainingFramework::megatron_deepspeed;
  EXPECT_THAT(
      strata::testing::input_error_message([&] { Trainer(deepspeed, "plan.json", data, {}); }),
      HasSubstr("plan.json: /framework: \"megatron-deepspeed\" is a plan for another training "
                "stack"));
  schemas::Plan half = plan_for(model, 1, 1);
  half.precision = schemas::Dtype::bf16;
  EXPECT_THAT(
      strata::testing::input_error_message([&] { Trainer(half, "plan.json", data, {}); }),
      HasSubstr("plan.json: /precision: the CPU backend trains in fp32, the plan says bf16"));
  TrainingOptions resume;
  resume.resume = true;
  resume.checkpoint_dir = fs::path(::testing::TempDir()) / "no-checkpoints-here";
  EXPECT_THAT(strata::testing::input_error_message(
                  [&] { Trainer(plan_for(model, 1, 1), "plan.json", data, resume); }),
              HasSubstr("--resume: no checkpoint here"));
}

}  // namespace
}  // namespace strata::executor
