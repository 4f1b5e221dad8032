// One optimizer step of a one-device plan as `strata train` runs it: the Trainer's whole program —
// batches from a token file, the plan's micro-batches through the step driver, clipping and AdamW,
// the step's bookkeeping — for a GPT-2 124M-shaped model (hidden 768, 12 heads, vocabulary 50257)
// of 2 or 12 layers, 2 micro-batches of 2 × 128 tokens a step, on 1 or 2 threads. Built from the
// Trainer's public interface alone, so the same file builds against an earlier commit and the
// two binaries run side by side (BENCHMARKS.md: "Executor: the one-device step through the
// trainer"). Reports the median of 4 steps after 1 warm-up as the iteration time.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "strata/executor/train/trainer.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

constexpr std::int64_t kSeq = 128;
constexpr std::int64_t kMicroBatch = 2;
constexpr std::int64_t kGlobalBatch = 4;
constexpr int kWarmUpSteps = 1;
constexpr int kTimedSteps = 4;

schemas::Plan gpt2_shaped_plan(std::int64_t layers) {
  schemas::ModelConfig model = schemas::model_preset("gpt2-124m");
  model.num_layers = layers;
  model.dropout = 0.0;
  schemas::PlanKnobs knobs;
  knobs.seq_length = kSeq;
  knobs.micro_batch_size = kMicroBatch;
  knobs.global_batch_size = kGlobalBatch;
  knobs.recompute = schemas::RecomputeGranularity::none;
  knobs.precision = schemas::Dtype::fp32;
  return schemas::build_plan(model, schemas::cluster_preset("cpu-local"), knobs, "bench");
}

TokenFile tokens() {
  TokenFile file{"bench.bin", {}};
  std::uint32_t state = 1;
  for (int i = 0; i < 200'000; ++i) {
    state = state * 1664525u + 1013904223u;
    file.tokens.push_back(static_cast<std::uint16_t>((state >> 8) % 50257));
  }
  return file;
}

void BM_TrainerStep(benchmark::State& state) {
  Eigen::setNbThreads(static_cast<int>(state.range(1)));
  const TokenFile data = tokens();
  TrainingOptions options;
  options.steps = kWarmUpSteps + kTimedSteps;
  for (auto _ : state) {
    Trainer trainer(gpt2_shaped_plan(state.range(0)), "bench", data, options);
    std::vector<double> seconds;
    trainer.run([&](const StepRecord& record) { seconds.push_back(record.step_time_s); });
    seconds.erase(seconds.begin(), seconds.begin() + kWarmUpSteps);
    std::sort(seconds.begin(), seconds.end());
    state.SetIterationTime((seconds[kTimedSteps / 2 - 1] + seconds[kTimedSteps / 2]) / 2);
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(kGlobalBatch * kSeq), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainerStep)
    ->ArgsProduct({{2, 12}, {1, 2}})
    ->ArgNames({"layers", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);

}  // namespace
}  // namespace strata::executor

BENCHMARK_MAIN();
