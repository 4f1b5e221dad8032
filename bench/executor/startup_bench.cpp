// Start-up of a GPT-2 124M run on the CPU: drawing every initial parameter (124M counter-based
// normals) — the vectorised block draw that initialisation uses beside the one-counter-per-element,
// double-precision Box-Muller it replaced, in the same run — and building the whole model
// (store, layers, zero-mapped gradients). Argument: threads (OpenMP). Counter elements_per_s;
// compare row pairs. Time to first step and peak RSS of `strata train` are in BENCHMARKS.md.
#include <Random123/philox.h>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Random123/boxmuller.hpp>
#include <vector>

#include "strata/executor/model/transformer.h"
#include "strata/executor/random/counter_random.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

// One GPT-2 124M MLP weight's worth of elements per iteration: 768 × 3072.
constexpr std::int64_t kElements = 768 * 3072;
constexpr std::int64_t kChunk = 2048;

// The previous draw: one Philox call and one double Box-Muller per element, only .x kept.
double one_counter_normal(const RandomStream& stream, std::uint64_t index) {
  const std::array<std::uint32_t, 4> words = random_words(stream, index);
  const std::uint64_t first = (static_cast<std::uint64_t>(words[0]) << 32) | words[1];
  const std::uint64_t second = (static_cast<std::uint64_t>(words[2]) << 32) | words[3];
  return r123::boxmuller(first, second).x;
}

void BM_NormalsOneCounterPerElement(benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  std::vector<float> values(kElements);
  const RandomStream stream{1234, stream_of_name("layers.0.mlp.fc.weight")};
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < kElements; ++i) {
      values[static_cast<std::size_t>(i)] =
          static_cast<float>(0.02 * one_counter_normal(stream, static_cast<std::uint64_t>(i)));
    }
    benchmark::DoNotOptimize(values.data());
  }
  state.counters["elements_per_s"] = benchmark::Counter(
      static_cast<double>(kElements), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_NormalsOneCounterPerElement)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime();

void BM_NormalsVectorisedBlocks(benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  std::vector<float> values(kElements);
  const RandomStream stream{1234, stream_of_name("layers.0.mlp.fc.weight")};
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (std::int64_t begin = 0; begin < kElements; begin += kChunk) {
      fill_random_normal(stream, static_cast<std::uint64_t>(begin),
                         std::min(kChunk, kElements - begin), 0.02f, values.data() + begin);
    }
    benchmark::DoNotOptimize(values.data());
  }
  state.counters["elements_per_s"] = benchmark::Counter(
      static_cast<double>(kElements), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_NormalsVectorisedBlocks)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime();

// The whole GPT-2 124M model as `strata train` builds it, initialised from a seed.
void BM_BuildGpt2Model(benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  schemas::ModelConfig model = schemas::model_preset("gpt2-124m");
  std::int64_t elements = 0;
  for (auto _ : state) {
    Transformer transformer(model, ScalarType::float32, 1234);
    elements = transformer.parameters().total_elements();
    benchmark::DoNotOptimize(transformer.parameters().values().raw());
  }
  state.counters["elements_per_s"] = benchmark::Counter(
      static_cast<double>(elements), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BuildGpt2Model)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace strata::executor
