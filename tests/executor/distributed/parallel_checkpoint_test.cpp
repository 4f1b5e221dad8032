// A checkpointed parallel run resumes bit-identically on its own layout, continues on another
// (resharded offline or on load, from context parallelism to none), and cycles through strategies
// in memory with the one-device numbers: the checkpoint cases of parallel_training_test.cpp's
// program, which runs the cases of the world size mpirun gives it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "parallel_training_cases.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/checkpoint_resharding.h"

namespace strata::executor {
namespace {

namespace fs = std::filesystem;
using namespace parallel_cases;  // the layouts, plans and runs every case trains

// Resuming a parallel run from its checkpoint continues it bit for bit: 6 steps with checkpoints
// at 3 and 6; then, as if the job had died after step 3, a new job resumes from step 3.
class ParallelResume : public ::testing::TestWithParam<Layout> {};

TEST_P(ParallelResume, ContinuesBitIdentically) {
  const Layout& layout = GetParam();
  Communicator& world = world_communicator();
  const schemas::ModelConfig model = model_named(layout.model, layout.dropout);
  const TokenFile data = token_data();
  const schemas::Plan plan = plan_of(model, layout);
  // One directory for the whole job (as on a shared file system), made fresh by rank 0.
  const fs::path directory =
      fs::path(::testing::TempDir()) /
      ("strata-parallel-resume-" + layout.name + "-" + std::to_string(launched_ranks()));
  if (world.rank() == 0) fs::remove_all(directory);
  world.barrier();

  TrainingOptions options = training_options();
  options.steps = 6;
  options.checkpoint_dir = directory;
  options.checkpoint_every = 3;
  Trainer uninterrupted(plan, layout.name, data, options, &world);
  const RunRecord expected = train(uninterrupted);
  ParameterStore expected_values(transformer_parameters(model), ScalarType::float32);
  uninterrupted.gather_parameters(expected_values);
  world.barrier();
  if (world.rank() == 0) fs::remove_all(directory / "step_00000006");
  world.barrier();

  options.resume = true;
  Trainer resumed(plan, layout.name, data, options, &world);
  EXPECT_EQ(resumed.completed_steps(), 3);
  const RunRecord continued = train(resumed);
  ParameterStore resumed_values(transformer_parameters(model), ScalarType::float32);
  resumed.gather_parameters(resumed_values);
  if (world.rank() != 0) return;
  ASSERT_EQ(continued.losses.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(continued.losses[i], expected.losses[3 + i]) << "step " << i + 4;
  }
  EXPECT_EQ(0, std::memcmp(resumed_values.values().raw(), expected_values.values().raw(),
                           expected_values.values().bytes()));
  // Each piece of state is written once: per tp rank, and per dp × cp rank where ZeRO shards it.
  const fs::path checkpoint = directory / "step_00000003";
  std::int64_t files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(checkpoint)) {
    files += entry.path().extension() == ".bin" ? 1 : 0;
  }
  const std::int64_t shards = layout.zero_shards();
  const std::int64_t value_files = layout.tp * layout.pp * (layout.zero_stage >= 3 ? shards : 1);
  const std::int64_t moment_files = layout.tp * layout.pp * (layout.zero_stage >= 1 ? shards : 1);
  EXPECT_EQ(files, value_files + moment_files);
}

std::vector<Layout> resume_layouts_for_this_job() {
  std::vector<Layout> layouts;
  for (const Layout& layout :
       {Layout{"Dp2Zero1", "gpt-odd", 1, 2, false, 1, 0.1},
        Layout{"Dp2Tp2SequenceParallelZero3", "llama-tiny", 2, 2, true, 3},
        Layout{"Tp2Dp2Zero0", "gpt-tiny", 2, 2},
        pipeline("Pp2Vpp2TiedEmbeddings", "gpt-tiny", 1, 1, 2, 2,
                 schemas::ScheduleType::interleaved_one_f_one_b),
        pipeline("Dp2Pp2Zero3ZbH1Dropout", "gpt-tiny", 1, 2, 2, 1, schemas::ScheduleType::zb_h1, 3,
                 0.1),
        context_parallel({"Cp2Dp2Zero1", "gpt-odd", 1, 2, false, 1, 0.1}, 2),
        context_parallel({"Cp2Zero3Llama", "llama-tiny", 1, 1, false, 3}, 2),
        hybrid({"Dp4Shard2Zero3Dropout", "gpt-odd", 1, 4, false, 3, 0.1}, 2)}) {
    if (layout.ranks() == launched_ranks()) layouts.push_back(layout);
  }
  return layouts;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ParallelResume,
                         ::testing::ValuesIn(resume_layouts_for_this_job()),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return info.param.name;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ParallelResume);

// A trainer resumed at step 5 of a 10-step run trains steps 6 to 10 with the losses of the run
// it continues (`uninterrupted`, as rank 0 recorded it).
void expect_continues_the_run(Communicator& world, Trainer& trainer, const RunRecord& uninterrupted,
                              const std::string& layout) {
  EXPECT_EQ(trainer.completed_steps(), 5) << layout;
  const RunRecord continued = train(trainer);
  if (world.rank() != 0) return;
  ASSERT_EQ(continued.losses.size(), 5u) << layout;
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(continued.losses[i], uninterrupted.losses[5 + i], kTolerance * continued.losses[i])
        << layout << ", step " << i + 6;
  }
}

// A checkpoint moves between layouts: 5 steps on dp2·tp2·pp2, the step-5 checkpoint resharded to
// tp4·pp2 and to one device, 5 more steps on each: the losses of 10 uninterrupted steps.
TEST(ParallelReshard, ContinuesOnAnotherLayout) {
  if (launched_ranks() != 8) GTEST_SKIP() << "runs at 8 ranks";
  Communicator& world = world_communicator();
  const schemas::ModelConfig model = model_named("gpt-tiny", 0.1);
  const TokenFile data = token_data();
  const fs::path root = fs::path(::testing::TempDir()) / "strata-parallel-reshard";
  if (world.rank() == 0) fs::remove_all(root);
  world.barrier();
  TrainingOptions options = training_options();
  options.checkpoint_dir = root / "first";
  options.checkpoint_every = 5;
  const schemas::Plan first =
      plan_of(model, pipeline("Dp2Tp2Pp2", "gpt-tiny", 2, 2, 2, 1,
                              schemas::ScheduleType::one_f_one_b, 0, 0.1, false, true));
  RunRecord uninterrupted;
  {
    Trainer trainer(first, "first", data, options, &world);
    uninterrupted = train(trainer);
  }
  const schemas::Plan second = plan_of(
      model, pipeline("Tp4Pp2", "gpt-tiny", 4, 1, 2, 1, schemas::ScheduleType::zb_h1, 1, 0.1));
  if (world.rank() == 0) {
    const fs::path step5 = root / "first" / "step_00000005";
    reshard_checkpoint(step5, model, layout::state_layout_of(second), root / "second");
    reshard_checkpoint(step5, model, std::nullopt, root / "one");
  }
  world.barrier();
  options.resume = true;
  options.checkpoint_dir = root / "second";
  options.checkpoint_every = 0;
  Trainer resumed(second, "second", data, options, &world);
  EXPECT_EQ(resumed.completed_steps(), 5);
  const RunRecord continued = train(resumed);
  if (world.rank() != 0) return;
  ASSERT_EQ(continued.losses.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(continued.losses[i], uninterrupted.losses[5 + i], kTolerance * continued.losses[i])
        << "tp4·pp2, step " << i + 6;
  }
  options.checkpoint_dir = root / "one";
  Trainer alone(one_device_plan(model), "one device", data, options);
  EXPECT_EQ(alone.completed_steps(), 5);
  const RunRecord single = train(alone);
  ASSERT_EQ(single.losses.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(single.losses[i], uninterrupted.losses[5 + i], kTolerance * single.losses[i])
        << "one device, step " << i + 6;
  }
}

// The same without a reshard step: the step-5 checkpoint of dp2·tp2·pp2, copied as it is, resumes
// on dp4·tp2 with sequence parallelism and ZeRO-3 (each rank reading its own elements from the
// files that hold them) and on one device.
TEST(ParallelReshard, ResumesOnAnotherPlanDirectly) {
  if (launched_ranks() != 8) GTEST_SKIP() << "runs at 8 ranks";
  Communicator& world = world_communicator();
  const schemas::ModelConfig model = model_named("gpt-tiny", 0.1);
  const TokenFile data = token_data();
  const fs::path root = fs::path(::testing::TempDir()) / "strata-parallel-resume-elsewhere";
  if (world.rank() == 0) fs::remove_all(root);
  world.barrier();
  TrainingOptions options = training_options();
  options.checkpoint_dir = root / "first";
  options.checkpoint_every = 5;
  RunRecord uninterrupted;
  {
    Trainer trainer(plan_of(model, pipeline("Dp2Tp2Pp2", "gpt-tiny", 2, 2, 2, 1,
                                            schemas::ScheduleType::one_f_one_b, 0, 0.1)),
                    "first", data, options, &world);
    uninterrupted = train(trainer);
  }
  if (world.rank() == 0) {
    for (const char* name : {"second", "context", "one"}) {
      fs::create_directories(root / name);
      fs::copy(root / "first" / "step_00000005", root / name / "step_00000005",
               fs::copy_options::recursive);
    }
  }
  world.barrier();
  options.resume = true;
  options.checkpoint_every = 0;
  const auto expect_steps_6_to_10 = [&](Trainer& trainer, const std::string& layout) {
    ASSERT_EQ(trainer.resume_changes().size(), 1u) << layout;
    EXPECT_NE(trainer.resume_changes()[0].find("resharded on load"), std::string::npos)
        << trainer.resume_changes()[0];
    expect_continues_the_run(world, trainer, uninterrupted, layout);
  };
  options.checkpoint_dir = root / "second";
  Trainer resumed(
      plan_of(model, Layout{"Dp4Tp2SequenceParallelZero3", "gpt-tiny", 2, 4, true, 3, 0.1}),
      "second", data, options, &world);
  expect_steps_6_to_10(resumed, "dp4·tp2·sp ZeRO-3");
  options.checkpoint_dir = root / "context";
  Trainer context(
      plan_of(model, context_parallel(
                         {"Cp2Dp2Tp2SequenceParallelZero1", "gpt-tiny", 2, 2, true, 1, 0.1}, 2)),
      "context", data, options, &world);
  expect_steps_6_to_10(context, "cp2·dp2·tp2·sp ZeRO-1");
  if (world.rank() != 0) return;
  options.checkpoint_dir = root / "one";
  Trainer alone(one_device_plan(model), "one device", data, options);
  expect_steps_6_to_10(alone, "one device");
}

// Hetu's example at small scale: one run on 8 ranks that switches layout in memory every 3 steps
// — dp2·tp2·pp2, dp8 at ZeRO-1, dp4·tp2·sp at ZeRO-3, tp8·sp, cp2·dp4 at ZeRO-1, dp2·tp2·pp2 at
// ZeRO-1, and that again (identical placements) — logs the one-device run's loss and gradient
// norm at every step; each switch moved state, the last moved nothing.
TEST(ParallelSwitch, CyclesThroughStrategiesWithTheOneDeviceNumbers) {
  if (launched_ranks() != 8) GTEST_SKIP() << "runs at 8 ranks";
  Communicator& world = world_communicator();
  schemas::ModelConfig model = model_named("gpt-tiny", 0.1);
  model.num_attention_heads = 8;  // of 32, so that tp 8 splits them
  model.num_kv_heads = 8;
  model.head_dim = 32;
  const TokenFile data = token_data();
  const std::vector<Layout> cycle{
      pipeline("Dp2Tp2Pp2", "gpt-tiny", 2, 2, 2, 1, schemas::ScheduleType::one_f_one_b, 0, 0.1,
               false, true),
      Layout{"Dp8Zero1", "gpt-tiny", 1, 8, false, 1, 0.1},
      Layout{"Dp4Tp2SequenceParallelZero3", "gpt-tiny", 2, 4, true, 3, 0.1},
      Layout{"Tp8SequenceParallel", "gpt-tiny", 8, 1, true, 0, 0.1},
      context_parallel(Layout{"Cp2Dp4Zero1", "gpt-tiny", 1, 4, false, 1, 0.1}, 2),
      pipeline("Dp2Tp2Pp2Zero1", "gpt-tiny", 2, 2, 2, 1, schemas::ScheduleType::one_f_one_b, 1, 0.1,
               false, true),
      pipeline("Dp2Tp2Pp2Zero1", "gpt-tiny", 2, 2, 2, 1, schemas::ScheduleType::one_f_one_b, 1, 0.1,
               false, true)};
  constexpr std::int64_t kStepsPerLayout = 3;
  TrainingOptions options = training_options();
  options.steps = kStepsPerLayout * static_cast<std::int64_t>(cycle.size());
  TrainingOptions switching = options;
  for (std::size_t i = 1; i < cycle.size(); ++i) {
    switching.switches.push_back({kStepsPerLayout * static_cast<std::int64_t>(i),
                                  plan_of(model, cycle[i]), cycle[i].name, "."});
  }
  RunRecord run;
  Trainer trainer(plan_of(model, cycle[0]), cycle[0].name, data, switching, &world);
  const TrainingSummary summary = trainer.run([&](const StepRecord& record) {
    run.losses.push_back(record.loss);
    run.norms.push_back(record.gradient_norm);
  });
  ASSERT_EQ(summary.switches.size(), cycle.size() - 1);
  for (std::size_t i = 0; i + 1 < summary.switches.size(); ++i) {
    EXPECT_GT(summary.switches[i].most_sent_bytes, 0u) << summary.switches[i].to;
  }
  EXPECT_EQ(summary.switches.back().most_sent_elements, 0) << "identical placements";
  EXPECT_EQ(summary.switches.back().most_received_elements, 0) << "identical placements";
  if (world.rank() != 0) return;
  Trainer alone(one_device_plan(model), "one device", data, options);
  const RunRecord expected = train(alone);
  ASSERT_EQ(run.losses.size(), expected.losses.size());
  for (std::size_t i = 0; i < run.losses.size(); ++i) {
    const std::string& layout = cycle[i / kStepsPerLayout].name;
    EXPECT_NEAR(run.losses[i], expected.losses[i], kTolerance * expected.losses[i])
        << layout << ", step " << i + 1;
    EXPECT_NEAR(run.norms[i], expected.norms[i], kTolerance * expected.norms[i])
        << layout << ", step " << i + 1;
  }
}

// A context-parallel run's checkpoint (its ZeRO shards numbered over dp × cp) resumes on a plan
// without cp and on one device, continuing the run it belongs to.
TEST(ParallelReshard, ContextParallelCheckpointResumesWithoutCp) {
  if (launched_ranks() != 4) GTEST_SKIP() << "runs at 4 ranks";
  Communicator& world = world_communicator();
  const schemas::ModelConfig model = model_named("llama-tiny", 0.1);
  const TokenFile data = token_data();
  const fs::path root = fs::path(::testing::TempDir()) / "strata-parallel-resume-without-cp";
  if (world.rank() == 0) fs::remove_all(root);
  world.barrier();
  TrainingOptions options = training_options();
  options.checkpoint_dir = root / "context";
  options.checkpoint_every = 5;
  RunRecord uninterrupted;
  {
    Trainer trainer(
        plan_of(model, context_parallel({"Cp2Dp2Zero3", "llama-tiny", 1, 2, false, 3, 0.1}, 2)),
        "context", data, options, &world);
    uninterrupted = train(trainer);
  }
  if (world.rank() == 0) {
    for (const char* name : {"without", "hybrid", "one"}) {
      fs::create_directories(root / name);
      fs::copy(root / "context" / "step_00000005", root / name / "step_00000005",
               fs::copy_options::recursive);
    }
  }
  world.barrier();
  options.resume = true;
  options.checkpoint_every = 0;
  const auto expect_steps_6_to_10 = [&](Trainer& trainer, const std::string& layout) {
    expect_continues_the_run(world, trainer, uninterrupted, layout);
  };
  options.checkpoint_dir = root / "without";
  Trainer without(plan_of(model, Layout{"Dp2Tp2Zero1", "llama-tiny", 2, 2, false, 1, 0.1}),
                  "without", data, options, &world);
  expect_steps_6_to_10(without, "dp2·tp2 ZeRO-1");
  options.checkpoint_dir = root / "hybrid";
  Trainer hybrid_run(
      plan_of(model, hybrid({"Dp4Shard2Zero3", "llama-tiny", 1, 4, false, 3, 0.1}, 2)), "hybrid",
      data, options, &world);
  expect_steps_6_to_10(hybrid_run, "dp4 in shards of 2, ZeRO-3");
  if (world.rank() != 0) return;
  options.checkpoint_dir = root / "one";
  Trainer alone(one_device_plan(model), "one device", data, options);
  expect_steps_6_to_10(alone, "one device");
}

}  // namespace
}  // namespace strata::executor
