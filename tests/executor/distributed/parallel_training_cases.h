// What the parallel-training cases share (parallel_training_test.cpp,
// parallel_checkpoint_test.cpp): the layouts a job of this world size trains, each as a plan of a
// micro GPT, the one-device plan they are held against, the token data, the training options and
// how a run is recorded and compared.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "executor_models.h"
#include "strata/executor/distributed/communicator.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/model_shrink.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::executor::parallel_cases {

inline constexpr std::int64_t kSteps = 10;
inline constexpr double kTolerance = 1e-5;

// The ranks this process was started with, read before MPI starts (the cases are chosen at
// static initialisation).
inline int launched_ranks() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(variable)) return std::atoi(value);
  }
  return 1;
}

inline schemas::ModelConfig model_named(const std::string& name, double dropout) {
  schemas::ModelConfig model;
  if (name == "gpt-odd") {
    model = testing::odd_gpt();
  } else if (name == "gpt-tiny-257") {
    // tp does not divide the vocabulary: shards of 65, 64, 64, 64 rows.
    model = schemas::model_preset("gpt-tiny");
    model.vocab_size = 257;
    model.tied_embeddings = false;
  } else if (name == "dense-features") {
    // ALiBi over 6 heads, LayerNorm query/key norms, an embedding norm, squared-ReLU MLPs.
    model =
        schemas::resolve_model(std::string(STRATA_FIXTURES_DIR) + "/executor/dense-features.json");
  } else if (name == "latent-dense") {
    // DeepSeek-V3's latent attention in a dense model: under tp without sequence parallelism
    // only the latent gradients' tp sums keep the ranks equal.
    model = schemas::shrink_model(schemas::model_preset("deepseek-v3"));
    model.moe.reset();
    model.name = "latent-dense";
  } else if (name.ends_with("-shrunk")) {
    model = schemas::shrink_model(
        schemas::model_preset(name.substr(0, name.size() - std::string("-shrunk").size())));
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
inline Layout hybrid(Layout layout, std::int64_t dp_shard) {
  layout.dp_shard = dp_shard;
  return layout;
}

// A context-parallel layout: tp·cp·dp·pp ranks.
inline Layout context_parallel(Layout layout, std::int64_t cp) {
  layout.cp = cp;
  return layout;
}

// Context parallelism whose attention all-gathers the keys and values (Llama 3's variant).
inline Layout context_parallel_all_gather(Layout layout, std::int64_t cp) {
  layout.cp = cp;
  layout.cp_comm = schemas::ContextParallelComm::all_gather;
  return layout;
}

// A pipeline layout: tp·dp·pp ranks running `schedule`.
inline Layout pipeline(std::string name, std::string model, std::int64_t tp, std::int64_t dp,
                       std::int64_t pp, std::int64_t vpp, schemas::ScheduleType schedule,
                       std::int64_t zero_stage = 0, double dropout = 0, bool recompute = false,
                       bool sequence_parallel = false,
                       std::vector<std::int64_t> stage_layers = {}) {
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
inline constexpr const char* kCustomSchedule =
    "0F0,0F1,0F2,0F3,0B0,0B1,0B2,0B3\n"
    "1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n";

inline void PrintTo(const Layout& layout, std::ostream* out) { *out << layout.name; }

inline std::vector<Layout> all_layouts() {
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
      // Each tp rank normalises its own heads' queries and keys with the whole gains.
      {"Tp2QueryKeyNormQwen3", "qwen3-8b-shrunk", 2, 1},
      {"Tp2LatentAttention", "latent-dense", 2, 1},
      {"Tp2SequenceParallelDeepSeek", "deepseek-v3-shrunk", 2, 1, true},
      {"Tp2SequenceParallelFeatures", "dense-features", 2, 1, true},
      {"Dp2Zero3FeaturesDropout", "dense-features", 1, 2, false, 3, 0.1},
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
      // ALiBi's distances across the load-balanced chunks.
      context_parallel({"Cp2FeaturesDropout", "dense-features", 1, 1, false, 0, 0.1}, 2),
      context_parallel_all_gather({"Cp2AllGatherBloom", "bloom-176b-shrunk", 1, 1}, 2),
      context_parallel({"Cp2LatentAttentionDropout", "latent-dense", 1, 1, false, 0, 0.1}, 2),
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

inline std::vector<Layout> pipeline_layouts() {
  using schemas::ScheduleType;
  return {
      // 2 ranks.
      pipeline("Pp2OneFOneBTiedEmbeddings", "gpt-tiny", 1, 1, 2, 1, ScheduleType::one_f_one_b),
      pipeline("Pp2OneFOneBLlamaDropout", "llama-tiny", 1, 1, 2, 1, ScheduleType::one_f_one_b, 0,
               0.1),
      pipeline("Pp2OneFOneBLlamaDropoutRecompute", "llama-tiny", 1, 1, 2, 1,
               ScheduleType::one_f_one_b, 0, 0.1, true),
      pipeline("Pp2Gpipe", "gpt-odd", 1, 1, 2, 1, ScheduleType::gpipe),
      pipeline("Pp2ZbH1FeaturesRecompute", "dense-features", 1, 1, 2, 1, ScheduleType::zb_h1, 0, 0,
               true),
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

inline std::vector<Layout> layouts_for_this_job() {
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
inline std::filesystem::path custom_schedule_file() {
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) /
      ("strata-custom-schedule-" + std::to_string(launched_ranks()) + ".csv");
  return file;
}

inline schemas::Plan plan_of(const schemas::ModelConfig& model, const Layout& layout) {
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

inline schemas::Plan one_device_plan(const schemas::ModelConfig& model) {
  return plan_of(model, Layout{"one device", model.name});
}

inline TokenFile token_data() {
  TokenFile file{"pattern.bin", {}};
  std::uint32_t state = 12345;
  for (int i = 0; i < 20000; ++i) {
    state = state * 1664525u + 1013904223u;  // a fixed LCG: the same tokens on every rank
    file.tokens.push_back(static_cast<std::uint16_t>((state >> 16) % 256));
  }
  return file;
}

// Held-out tokens from another LCG seed: validated on at steps 0, 5 and 10.
inline TokenFile validation_data() {
  TokenFile file{"validation.bin", {}};
  std::uint32_t state = 777;
  for (int i = 0; i < 2000; ++i) {
    state = state * 1664525u + 1013904223u;
    file.tokens.push_back(static_cast<std::uint16_t>((state >> 16) % 256));
  }
  return file;
}

inline TrainingOptions training_options() {
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

inline RunRecord train(Trainer& trainer) {
  RunRecord run;
  trainer.run(
      [&](const StepRecord& record) {
        run.losses.push_back(record.loss);
        run.norms.push_back(record.gradient_norm);
      },
      [&](const EvaluationRecord& record) { run.validation_losses.push_back(record.loss); });
  return run;
}

inline double largest_difference(const Tensor& a, const Tensor& b) {
  double largest = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(a.data<float>()[i]) -
                                         static_cast<double>(b.data<float>()[i])));
  }
  return largest;
}

// ‖a − b‖ / ‖b‖, with ‖b‖ taken as at least an RMS of 1e-4 per element: below any parameter that
// trains (a bias that starts at zero is ~1e-3 after ten steps at lr 1e-3), above the ~1e-8 that
// AdamW makes of the rounding noise in a parameter whose gradient is zero in exact arithmetic (a
// key norm's bias without rotary positions: the softmax ignores what shifts a query's scores
// alike). Such a parameter is still held to the element-wise bound.
inline double relative_norm_difference(const Tensor& a, const Tensor& b) {
  double difference = 0, reference = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    difference += (x - y) * (x - y);
    reference += y * y;
  }
  const double floor = 1e-8 * static_cast<double>(a.numel());
  return std::sqrt(difference / std::max(reference, floor));
}

}  // namespace strata::executor::parallel_cases
