// Every layout computes the one-device numbers: under mpirun, each case trains a plan's layout —
// tensor, sequence and data parallelism, ZeRO 1-3, dropout, recomputation, and pipelines run by
// the schedule IR (1F1B, GPipe, interleaved, ZB-H1, a custom CSV; uneven, embedding-only and
// head-only stages; tied embeddings across stages) — for 10 steps, and
// rank 0 holds it against the same plan trained on one rank in this process: per-step losses
// within 1e-5 relative, and the final parameters (gathered from every rank's slices and shards)
// within 1e-5 in norm, per parameter. Also: a checkpointed run resumes bit-identically.
//
// The program runs the cases of the world size mpirun gives it (CTest starts it at 2, 4 and 8
// ranks); rank 0 reports, other ranks print only their own failures, and the job fails when any
// rank's case fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "executor_models.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/checkpoint_resharding.h"
#include "strata/executor/distributed/communicator.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSteps = 10;
constexpr double kTolerance = 1e-5;

// The ranks this process was started with, read before MPI starts (the cases are chosen at
// static initialisation).
int launched_ranks() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(variable)) return std::atoi(value);
  }
  return 1;
}

schemas::ModelConfig model_named(const std::string& name, double dropout) {
  schemas::ModelConfig model;
  if (name == "gpt-odd") {
    model = testing::odd_gpt();
  } else if (name == "gpt-tiny-257") {
    // tp does not divide the vocabulary: shards of 65, 64, 64, 64 rows.
    model = schemas::model_preset("gpt-tiny");
    model.vocab_size = 257;
    model.tied_embeddings = false;
  } else {
    model = schemas::model_preset(name);
  }
  model.dropout = dropout;
  return model;
}

struct Layout;
void PrintTo(const Layout& layout, std::ostream* out);

struct Layout {
  std::string name;
  std::string model;
  std::int64_t tp = 1, dp = 1;
  bool sequence_parallel = false;
  std::int64_t zero_stage = 0;
  double dropout = 0;
  bool recompute = false;
  std::int64_t bucket_elements = 0;  // 0: the default (one bucket for these models)
  bool overlap_grad_reduce = true;
  std::int64_t pp = 1, vpp = 1;
  schemas::ScheduleType schedule = schemas::ScheduleType::one_f_one_b;
  // Layers per stage (pp·vpp entries, the first with the embedding, the last with the head);
  // empty: the plan's even split.
  std::vector<std::int64_t> stage_layers = {};
  std::int64_t cp = 1;
  std::int64_t dp_shard = 0;  // hybrid sharding: dp ranks per ZeRO shard group; 0: all of dp
  schemas::ContextParallelComm cp_comm = schemas::ContextParallelComm::ring;
  std::int64_t ranks() const { return tp * cp * dp * pp; }
  std::int64_t zero_shards() const { return (dp_shard > 0 ? dp_shard : dp) * cp; }
};

// A hybrid-sharded layout: ZeRO over groups of dp_shard dp ranks, replicated across them.
Layout hybrid(Layout layout, std::int64_t dp_shard) {
  layout.dp_shard = dp_shard;
  return layout;
}

// A context-parallel layout: tp·cp·dp·pp ranks.
Layout context_parallel(Layout layout, std::int64_t cp) {
  layout.cp = cp;
  return layout;
}

// Context parallelism whose attention all-gathers the keys and values (Llama 3's variant).
Layout context_parallel_all_gather(Layout layout, std::int64_t cp) {
  layout.cp = cp;
  layout.cp_comm = schemas::ContextParallelComm::all_gather;
  return layout;
}

// A pipeline layout: tp·dp·pp ranks running `schedule`.
Layout pipeline(std::string name, std::string model, std::int64_t tp, std::int64_t dp,
                std::int64_t pp, std::int64_t vpp, schemas::ScheduleType schedule,
                std::int64_t zero_stage = 0, double dropout = 0, bool recompute = false,
                bool sequence_parallel = false, std::vector<std::int64_t> stage_layers = {}) {
  Layout layout{std::move(name),   std::move(model), tp,      dp,
                sequence_parallel, zero_stage,       dropout, recompute};
  layout.pp = pp;
  layout.vpp = vpp;
  layout.schedule = schedule;
  layout.stage_layers = std::move(stage_layers);
  return layout;
}

// A schedule as a user would write one (compute actions only; the reader adds the sends,
// receives and per-step actions): rank 0 runs all its forwards first, rank 1 alternates.
constexpr const char* kCustomSchedule =
    "0F0,0F1,0F2,0F3,0B0,0B1,0B2,0B3\n"
    "1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n";

void PrintTo(const Layout& layout, std::ostream* out) { *out << layout.name; }

std::vector<Layout> all_layouts() {
  return {
      // 2 ranks.
      {"Dp2", "gpt-tiny", 1, 2},
      {"Tp2TiedEmbeddings", "gpt-tiny", 2, 1},
      {"Tp2Llama", "llama-tiny", 2, 1},
      {"Tp2SequenceParallel", "gpt-tiny", 2, 1, true},
      {"Tp2SequenceParallelDropout", "gpt-tiny", 2, 1, true, 0, 0.1},
      {"Tp2RecomputeDropout", "llama-tiny", 2, 1, false, 0, 0.1, true},
      {"Dp2Zero1Padded", "gpt-odd", 1, 2, false, 1},
      {"Dp2Zero2Padded", "gpt-odd", 1, 2, false, 2},
      {"Dp2Zero3Padded", "gpt-odd", 1, 2, false, 3},
      {"Dp2Zero3LlamaRecompute", "llama-tiny", 1, 2, false, 3, 0, true},
      {"Dp2SmallBucketsNoOverlap", "gpt-tiny", 1, 2, false, 0, 0, false, 300'000, false},
      // 4 ranks.
      {"Tp4", "gpt-tiny", 4, 1},
      {"Tp4LlamaReplicatedKvHeads", "llama-tiny", 4, 1},
      {"Tp4SequenceParallelUnevenVocabulary", "gpt-tiny-257", 4, 1, true, 0, 0.1},
      {"Dp2Tp2", "gpt-tiny", 2, 2},
      {"Dp2Tp2SequenceParallel", "llama-tiny", 2, 2, true},
      {"Dp2Tp2SequenceParallelZero3DropoutRecompute", "gpt-tiny", 2, 2, true, 3, 0.1, true},
      {"Dp4Zero1Padded", "gpt-odd", 1, 4, false, 1},
      {"Dp4Zero2PaddedSmallBuckets", "gpt-odd", 1, 4, false, 2, 0, false, 10'000},
      {"Dp4Zero3PaddedDropout", "gpt-odd", 1, 4, false, 3, 0.1},
      // 8 ranks.
      {"Dp2Tp4SequenceParallelZero1Llama", "llama-tiny", 4, 2, true, 1},
      // Context parallelism: 2 ranks.
      context_parallel({"Cp2Dropout", "gpt-tiny", 1, 1, false, 0, 0.1}, 2),
      context_parallel({"Cp2LlamaGqa", "llama-tiny", 1, 1}, 2),
      context_parallel_all_gather({"Cp2AllGatherLlamaGqa", "llama-tiny", 1, 1}, 2),
      // 4 ranks.
      context_parallel({"Cp4Dropout", "gpt-odd", 1, 1, false, 0, 0.1}, 4),
      context_parallel({"Cp2Tp2SequenceParallelLlama", "llama-tiny", 2, 1, true}, 2),
      context_parallel({"Cp2Dp2Zero3Dropout", "gpt-odd", 1, 2, false, 3, 0.1}, 2),
      context_parallel_all_gather({"Cp4AllGatherDropout", "gpt-odd", 1, 1, false, 0, 0.1}, 4),
      context_parallel(pipeline("Cp2Pp2Vpp2InterleavedLlama", "llama-tiny", 1, 1, 2, 2,
                                schemas::ScheduleType::interleaved_one_f_one_b),
                       2),
      // Hybrid sharding: 4 ranks.
      hybrid({"Dp4Shard2Zero1Dropout", "gpt-odd", 1, 4, false, 1, 0.1}, 2),
      hybrid({"Dp4Shard2Zero3Llama", "llama-tiny", 1, 4, false, 3}, 2),
      // 8 ranks.
      hybrid({"Dp4Shard2Tp2SequenceParallelZero1Llama", "llama-tiny", 2, 4, true, 1}, 2),
  };
}

std::vector<Layout> pipeline_layouts() {
  using schemas::ScheduleType;
  return {
      // 2 ranks.
      pipeline("Pp2OneFOneBTiedEmbeddings", "gpt-tiny", 1, 1, 2, 1, ScheduleType::one_f_one_b),
      pipeline("Pp2OneFOneBLlamaDropout", "llama-tiny", 1, 1, 2, 1, ScheduleType::one_f_one_b, 0,
               0.1),
      pipeline("Pp2OneFOneBLlamaDropoutRecompute", "llama-tiny", 1, 1, 2, 1,
               ScheduleType::one_f_one_b, 0, 0.1, true),
      pipeline("Pp2Gpipe", "gpt-odd", 1, 1, 2, 1, ScheduleType::gpipe),
      pipeline("Pp2ZbH1TiedEmbeddingsDropout", "gpt-tiny", 1, 1, 2, 1, ScheduleType::zb_h1, 0, 0.1),
      pipeline("Pp2Vpp2Interleaved", "gpt-tiny", 1, 1, 2, 2, ScheduleType::interleaved_one_f_one_b),
      pipeline("Pp2Vpp2InterleavedLlamaRecompute", "llama-tiny", 1, 1, 2, 2,
               ScheduleType::interleaved_one_f_one_b, 0, 0, true),
      pipeline("Pp2CustomCsv", "llama-tiny", 1, 1, 2, 1, ScheduleType::custom),
      pipeline("Pp2EmbeddingOnlyStage", "gpt-tiny", 1, 1, 2, 1, ScheduleType::one_f_one_b, 0, 0,
               false, false, {0, 4}),
      // 4 ranks.
      pipeline("Pp4UnevenHeadOnlyStage", "gpt-tiny", 1, 1, 4, 1, ScheduleType::one_f_one_b, 0, 0,
               false, false, {2, 1, 1, 0}),
      pipeline("Dp2Pp2Zero1", "gpt-tiny", 1, 2, 2, 1, ScheduleType::one_f_one_b, 1),
      pipeline("Dp2Pp2Zero2ZbH1Llama", "llama-tiny", 1, 2, 2, 1, ScheduleType::zb_h1, 2),
      pipeline("Dp2Pp2Zero3TiedEmbeddingsDropout", "gpt-tiny", 1, 2, 2, 1,
               ScheduleType::one_f_one_b, 3, 0.1),
      pipeline("Dp2Pp2Zero3Llama", "llama-tiny", 1, 2, 2, 1, ScheduleType::one_f_one_b, 3),
      pipeline("Dp2Pp2Zero3ZbH1Dropout", "gpt-tiny", 1, 2, 2, 1, ScheduleType::zb_h1, 3, 0.1),
      pipeline("Tp2Pp2SequenceParallel", "gpt-tiny-257", 2, 1, 2, 1, ScheduleType::one_f_one_b, 0,
               0.1, false, true),
      // 8 ranks.
      pipeline("Dp2Tp2Pp2", "gpt-tiny", 2, 2, 2, 1, ScheduleType::one_f_one_b),
      pipeline("Dp2Tp2Pp2Vpp2SequenceParallelZero1", "llama-tiny", 2, 2, 2, 2,
               ScheduleType::interleaved_one_f_one_b, 1, 0, false, true),
  };
}

std::vector<Layout> layouts_for_this_job() {
  std::vector<Layout> layouts;
  for (const Layout& layout : all_layouts()) {
    if (layout.ranks() == launched_ranks()) layouts.push_back(layout);
  }
  for (const Layout& layout : pipeline_layouts()) {
    if (layout.ranks() == launched_ranks()) layouts.push_back(layout);
  }
  return layouts;
}

// The custom schedule's file, written once per job by rank 0 (the trainer reads it on every rank).
fs::path custom_schedule_file() {
  const fs::path file = fs::path(::testing::TempDir()) /
                        ("strata-custom-schedule-" + std::to_string(launched_ranks()) + ".csv");
  return file;
}

schemas::Plan plan_of(const schemas::ModelConfig& model, const Layout& layout) {
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = layout.tp;
  knobs.mesh.cp = layout.cp;
  knobs.cp_comm = layout.cp_comm;
  knobs.mesh.dp_shard = layout.dp_shard;
  knobs.mesh.dp = layout.dp;
  knobs.mesh.pp = layout.pp;
  knobs.mesh.vpp = layout.vpp;
  knobs.seq_length = 32;
  knobs.global_batch_size = 8;
  knobs.micro_batch_size = layout.dp >= 4 ? 1 : 2;
  knobs.sequence_parallel = layout.sequence_parallel;
  knobs.zero_stage = layout.zero_stage;
  knobs.overlap_grad_reduce = layout.overlap_grad_reduce;
  if (layout.bucket_elements > 0) knobs.gradient_bucket_elements = layout.bucket_elements;
  knobs.recompute =
      layout.recompute ? schemas::RecomputeGranularity::full : schemas::RecomputeGranularity::none;
  knobs.schedule = layout.schedule == schemas::ScheduleType::custom
                       ? schemas::ScheduleType::one_f_one_b
                       : layout.schedule;
  knobs.precision = schemas::Dtype::fp32;
  const std::string cluster = "cpu-local:" + std::to_string(layout.ranks());
  schemas::Plan plan = schemas::build_plan(model, schemas::resolve_cluster(cluster), knobs, "test");
  if (layout.schedule == schemas::ScheduleType::custom) {
    plan.schedule = {schemas::ScheduleType::custom, custom_schedule_file().string()};
  }
  if (!layout.stage_layers.empty()) {
    plan.stages.clear();
    std::int64_t next = 0;
    for (std::size_t s = 0; s < layout.stage_layers.size(); ++s) {
      plan.stages.push_back(
          {next, layout.stage_layers[s], s == 0, s + 1 == layout.stage_layers.size()});
      next += layout.stage_layers[s];
    }
  }
  return plan;
}

schemas::Plan one_device_plan(const schemas::ModelConfig& model) {
  return plan_of(model, Layout{"one device", model.name});
}

TokenFile token_data() {
  TokenFile file{"pattern.bin", {}};
  std::uint32_t state = 12345;
  for (int i = 0; i < 20000; ++i) {
    state = state * 1664525u + 1013904223u;  // a fixed LCG: the same tokens on every rank
    file.tokens.push_back(static_cast<std::uint16_t>((state >> 16) % 256));
  }
  return file;
}

// Held-out tokens from another LCG seed: validated on at steps 0, 5 and 10.
TokenFile validation_data() {
  TokenFile file{"validation.bin", {}};
  std::uint32_t state = 777;
  for (int i = 0; i < 2000; ++i) {
    state = state * 1664525u + 1013904223u;
    file.tokens.push_back(static_cast<std::uint16_t>((state >> 16) % 256));
  }
  return file;
}

TrainingOptions training_options() {
  TrainingOptions options;
  options.steps = kSteps;
  options.seed = 20261123;
  options.learning_rate = 1e-3;
  options.warmup_steps = 2;
  options.max_gradient_norm = 1.0;  // the norm sums every element once, or clipping differs
  // A parameter whose true gradient is exactly zero — the key bias: softmax ignores a shift
  // common to all keys — gets rounding noise of ~1e-9 instead, which AdamW with ε = 1e-8 turns
  // into steps of ±lr whose signs depend on summation order: no two implementations agree on
  // it. ε = 1e-6 leaves every real gradient's update alone and such noise's too small to matter.
  options.adamw.epsilon = 1e-6;
  options.eval_every = 5;
  options.eval_batches = 2;
  return options;
}

struct RunRecord {
  std::vector<double> losses, norms, validation_losses;
};

RunRecord train(Trainer& trainer) {
  RunRecord run;
  trainer.run(
      [&](const StepRecord& record) {
        run.losses.push_back(record.loss);
        run.norms.push_back(record.gradient_norm);
      },
      [&](const EvaluationRecord& record) { run.validation_losses.push_back(record.loss); });
  return run;
}

double largest_difference(const Tensor& a, const Tensor& b) {
  double largest = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(a.data<float>()[i]) -
                                         static_cast<double>(b.data<float>()[i])));
  }
  return largest;
}

double relative_norm_difference(const Tensor& a, const Tensor& b) {
  double difference = 0, reference = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    difference += (x - y) * (x - y);
    reference += y * y;
  }
  return reference > 0 ? std::sqrt(difference / reference) : std::sqrt(difference);
}

class ParallelTraining : public ::testing::TestWithParam<Layout> {};

TEST_P(ParallelTraining, ComputesTheOneDeviceNumbers) {
  const Layout& layout = GetParam();
  Communicator& world = world_communicator();
  const schemas::ModelConfig model = model_named(layout.model, layout.dropout);
  const TokenFile data = token_data();
  const TokenFile validation = validation_data();
  TrainingOptions options = training_options();

  // The one-device run, on rank 0 (the others wait for it in the parallel trainer's setup).
  RunRecord single;
  ParameterStore single_values(transformer_parameters(model), ScalarType::float32);
  if (world.rank() == 0) {
    if (layout.schedule == schemas::ScheduleType::custom) {
      std::FILE* file = std::fopen(custom_schedule_file().c_str(), "w");
      ASSERT_NE(file, nullptr);
      std::fputs(kCustomSchedule, file);
      std::fclose(file);
    }
    const schemas::Plan one = one_device_plan(model);
    Trainer trainer(one, "one device", data, options);
    trainer.set_validation_data(validation);
    single = train(trainer);
    trainer.gather_parameters(single_values);
  }

  const schemas::Plan plan = plan_of(model, layout);
  Trainer trainer(plan, layout.name, data, options, &world);
  ASSERT_EQ(trainer.groups().world().size(), plan.mesh.world_size());
  trainer.set_validation_data(validation);
  const RunRecord parallel = train(trainer);
  ParameterStore gathered(transformer_parameters(model), ScalarType::float32);
  trainer.gather_parameters(gathered);
  if (world.rank() != 0) return;

  ASSERT_EQ(parallel.losses.size(), single.losses.size());
  for (std::size_t step = 0; step < single.losses.size(); ++step) {
    EXPECT_NEAR(parallel.losses[step], single.losses[step], kTolerance * single.losses[step])
        << "loss of step " << step + 1;
    EXPECT_NEAR(parallel.norms[step], single.norms[step], 1e-4 * single.norms[step])
        << "gradient norm of step " << step + 1;
  }
  // Validation (no dropout, the pipeline's forward-only program) agrees too, at steps 0, 5, 10.
  ASSERT_EQ(single.validation_losses.size(), 3u);
  ASSERT_EQ(parallel.validation_losses.size(), single.validation_losses.size());
  for (std::size_t i = 0; i < single.validation_losses.size(); ++i) {
    EXPECT_NEAR(parallel.validation_losses[i], single.validation_losses[i],
                kTolerance * single.validation_losses[i])
        << "validation loss at step " << 5 * i;
  }
  for (const ParameterEntry& entry : single_values.entries()) {
    const Tensor& value = gathered.entry(entry.spec.name).value;
    EXPECT_LE(largest_difference(value, entry.value), kTolerance) << entry.spec.name;
    // And no tensor off as a whole: biases that started at zero are the sensitive ones.
    EXPECT_LE(relative_norm_difference(value, entry.value), 10 * kTolerance) << entry.spec.name;
    if (std::getenv("STRATA_PRINT_DIFFERENCES")) {
      std::printf("%s %s: largest %.3g relative %.3g\n", layout.name.c_str(),
                  entry.spec.name.c_str(), largest_difference(value, entry.value),
                  relative_norm_difference(value, entry.value));
    }
  }
  // The run changed the parameters: the comparison is of trained values, not of the init.
  ParameterStore initial(transformer_parameters(model), ScalarType::float32);
  initial.initialize(options.seed);
  EXPECT_GT(relative_norm_difference(gathered.entry("embedding.word").value,
                                     initial.entry("embedding.word").value),
            1e-3);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ParallelTraining, ::testing::ValuesIn(layouts_for_this_job()),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return info.param.name;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ParallelTraining);

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
    reshard_checkpoint(step5, model, checkpoint_layout_of(second), root / "second");
    reshard_checkpoint(step5, model, nlohmann::json(), root / "one");
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

// Every rank reports its own failed assertions; rank 0 also the progress.
class FailuresOfOneRank : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOfOneRank(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_, result.file_name(), result.line_number(),
                   result.summary());
    }
  }

 private:
  int rank_;
};

// The runtime holds no more activation sets per model chunk than the schedule has micro-batches
// of that chunk in flight — from its forward until its backward ran and its gradient went
// upstream. A set whose SEND_B had not completed once stayed out of use until it had, and the
// last stage of 1F1B then held two micro-batches' activations for one in flight.
TEST(PipelineActivations, NoMoreSetsThanMicroBatchesInFlight) {
  Communicator& world = world_communicator();
  if (world.size() > 4) GTEST_SKIP() << "a pipeline over the whole job, up to 4 ranks";
  using schemas::ScheduleType;
  const int pp = world.size();
  std::vector<Layout> layouts{
      pipeline("OneFOneB", "gpt-tiny", 1, 1, pp, 1, ScheduleType::one_f_one_b),
      pipeline("ZeroBubble", "gpt-tiny", 1, 1, pp, 1, ScheduleType::zb_h1)};
  if (pp == 2) {  // gpt-tiny's 4 layers: 2 chunks of 1 per rank
    layouts.push_back(
        pipeline("Interleaved", "gpt-tiny", 1, 1, pp, 2, ScheduleType::interleaved_one_f_one_b));
  }
  for (const Layout& layout : layouts) {
    const schemas::ModelConfig model = model_named(layout.model, 0);
    TrainingOptions options = training_options();
    options.steps = 2;
    options.eval_every = 0;
    const TokenFile data = token_data();  // the trainer reads it, it does not copy it
    Trainer trainer(plan_of(model, layout), layout.name, data, options, &world);
    train(trainer);
    const schedule::PipelineSchedule& schedule = trainer.pipeline_schedule();
    // This rank's actions (a pipeline over the whole job: world rank = pipeline rank).
    std::vector<int> in_flight(static_cast<std::size_t>(schedule.vpp), 0);
    std::vector<int> most(in_flight.size(), 0);
    std::map<std::pair<int, int>, int> waiting;  // (stage, micro-batch): events before retiring
    for (const schedule::Action& action : schedule.ranks[static_cast<std::size_t>(world.rank())]) {
      const auto chunk = static_cast<std::size_t>(action.stage / pp);
      const std::pair<int, int> key{action.stage, action.micro_batch};
      switch (action.type) {
        case schedule::ActionType::forward:
          waiting[key] = action.stage == 0 ? 1 : 2;  // the backward, then SEND_B past stage 0
          most[chunk] = std::max(most[chunk], ++in_flight[chunk]);
          continue;
        case schedule::ActionType::backward:
        case schedule::ActionType::backward_weight:
        case schedule::ActionType::send_backward:
          if (--waiting[key] == 0) --in_flight[chunk];
          continue;
        default:
          continue;
      }
    }
    for (const int left : in_flight)
      EXPECT_EQ(left, 0) << layout.name << ": a micro-batch never retired";
    const std::vector<std::size_t> sets = trainer.pipeline_activation_sets();
    ASSERT_EQ(sets.size(), most.size()) << layout.name;
    for (std::size_t chunk = 0; chunk < sets.size(); ++chunk) {
      EXPECT_GE(sets[chunk], 1u) << layout.name << " chunk " << chunk;
      EXPECT_LE(sets[chunk], static_cast<std::size_t>(most[chunk]))
          << layout.name << " chunk " << chunk << " on rank " << world.rank();
    }
  }
}

}  // namespace
// MPI_Alltoallv behind Communicator::all_to_all: member i sends member j a block of i + j + 1
// elements whose values name both (1000·i + 10·j + k), so a block delivered to the wrong member,
// from the wrong member or at the wrong place shows; one member sends nothing to itself.
TEST(Communicator, AllToAllDeliversEachBlockToItsMemberInRankOrder) {
  Communicator& world = world_communicator();
  const int members = world.size(), me = world.rank();
  const auto count = [](int from, int to) -> std::int64_t {
    return from == to && from == 1 ? 0 : from + to + 1;
  };
  std::vector<std::int64_t> send_counts, receive_counts;
  std::vector<float> sent;
  for (int to = 0; to < members; ++to) {
    send_counts.push_back(count(me, to));
    receive_counts.push_back(count(to, me));
    for (std::int64_t k = 0; k < count(me, to); ++k) {
      sent.push_back(static_cast<float>(1000 * me + 10 * to + k));
    }
  }
  Tensor send = Tensor::zeros({static_cast<std::int64_t>(sent.size())}, ScalarType::float32);
  std::copy(sent.begin(), sent.end(), send.data<float>());
  std::int64_t total = 0;
  for (std::int64_t c : receive_counts) total += c;
  Tensor receive = Tensor::zeros({total + 3}, ScalarType::float32);  // longer than needed
  world.all_to_all(send, send_counts, receive, receive_counts);
  std::int64_t at = 0;
  for (int from = 0; from < members; ++from) {
    for (std::int64_t k = 0; k < count(from, me); ++k) {
      EXPECT_EQ(receive.data<float>()[at++], static_cast<float>(1000 * from + 10 * me + k))
          << "from " << from << " element " << k;
    }
  }
  EXPECT_EQ(receive.data<float>()[total], 0.0f) << "wrote past its blocks";
}

// bfloat16 moves as 16-bit words (the CUDA ranks' activations, staged through host memory, use
// it): every bit pattern arrives as sent, the largest finite and the smallest subnormal too. MPI
// has no bfloat16 sum, so a reduction of host bfloat16 is refused (staging widens device bfloat16
// to float32 before it reduces).
TEST(Communicator, MovesBfloat16BitForBitAndRefusesItsReductions) {
  Communicator& world = world_communicator();
  const int members = world.size(), me = world.rank();
  const auto bits_of = [](int member, std::int64_t k) {
    constexpr std::uint16_t kPatterns[] = {0x7f7f, 0x0001, 0x8000, 0x3f80, 0xc2f7};
    return static_cast<std::uint16_t>(kPatterns[k % 5] ^ (member << 4));
  };
  constexpr std::int64_t kPart = 7;
  Tensor part = Tensor::zeros({kPart}, ScalarType::bfloat16);
  for (std::int64_t k = 0; k < kPart; ++k) part.data<BFloat16>()[k].bits = bits_of(me, k);
  Tensor whole = Tensor::zeros({kPart * members}, ScalarType::bfloat16);
  world.all_gather(part, whole);
  for (int member = 0; member < members; ++member) {
    for (std::int64_t k = 0; k < kPart; ++k) {
      EXPECT_EQ(whole.data<BFloat16>()[member * kPart + k].bits, bits_of(member, k))
          << "member " << member << " element " << k;
    }
  }
  Tensor broadcast = part.to(Device::cpu);
  world.broadcast(broadcast, 0);
  for (std::int64_t k = 0; k < kPart; ++k) {
    EXPECT_EQ(broadcast.data<BFloat16>()[k].bits, bits_of(0, k)) << "element " << k;
  }
  if (members > 1) {
    EXPECT_THROW(world.all_reduce(part, ReduceOp::sum), InvariantError);
  }
}

}  // namespace strata::executor

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  strata::executor::Communicator& world = strata::executor::world_communicator();
  if (world.rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new strata::executor::FailuresOfOneRank(world.rank()));
  }
  const int result = RUN_ALL_TESTS();
  // The job fails when any rank's cases failed.
  strata::executor::Tensor any =
      strata::executor::Tensor::zeros({1}, strata::executor::ScalarType::float64);
  any.data<double>()[0] = result;
  world.all_reduce(any, strata::executor::ReduceOp::max);
  return any.data<double>()[0] != 0 ? 1 : 0;
}
