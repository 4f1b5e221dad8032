// A whole `strata plan` search, end to end (enumeration, pruning, bounds, full simulation of the
// best candidates, two threads). Target (issue 4): ≥ 100,000 candidates scored and the answer out
// in ≤ 10 s on the 2-core machine, for GPT-3 175B on 1,024 H100s and Llama-3.1 405B on 16,384.
// Issue 33: GPT-3 175B ≤ 2 s, and a mixture of experts (DeepSeek-V3, fp8, as Megatron-LM runs it)
// on 2,048 H100s ≤ 10 s.
#include <benchmark/benchmark.h>

#include "strata/planner/plan_search.h"
#include "strata/schemas/presets.h"

namespace {

using namespace strata;

void search(benchmark::State& state, const char* model, const char* cluster,
            std::int64_t global_batch, std::int64_t seq_length,
            schemas::TrainingFramework framework = schemas::TrainingFramework::strata,
            schemas::Dtype precision = schemas::Dtype::bf16) {
  const schemas::ModelConfig config = schemas::model_preset(model);
  const schemas::ClusterConfig machine = schemas::cluster_preset(cluster);
  planner::SearchOptions options;
  options.global_batch_size = global_batch;
  options.seq_length = seq_length;
  options.framework = framework;
  options.precision = precision;
  planner::SearchStatistics statistics;
  for (auto _ : state) {
    const planner::SearchResult result = planner::search_plans(config, machine, options);
    benchmark::DoNotOptimize(result.best.data());
    statistics = result.statistics;
  }
  state.counters["candidates"] = static_cast<double>(statistics.enumerated);
  state.counters["estimated"] = static_cast<double>(statistics.estimated);
  state.counters["simulated"] = static_cast<double>(statistics.simulated);
  state.counters["candidates_per_s"] = benchmark::Counter(
      static_cast<double>(statistics.enumerated) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void BM_PlanGpt3_175B_1024H100(benchmark::State& state) {
  search(state, "gpt3-175b", "dgx-h100:128", 1536, 2048);
}
BENCHMARK(BM_PlanGpt3_175B_1024H100)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// The largest global batch Strata accepts (2^24 sequences): the search must take no longer than at
// the published batch above (long steps are simulated as two shorter ones).
void BM_PlanGpt3_175B_1024H100_LargestBatch(benchmark::State& state) {
  search(state, "gpt3-175b", "dgx-h100:128", schemas::kMaxGlobalBatchSize, 2048);
}
BENCHMARK(BM_PlanGpt3_175B_1024H100_LargestBatch)
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

void BM_PlanLlama405B_16384H100(benchmark::State& state) {
  search(state, "llama3.1-405b", "dgx-h100:2048", 2048, 8192);
}
BENCHMARK(BM_PlanLlama405B_16384H100)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// The strata framework's executor has no MoE layer yet, so the plans are Megatron-LM's.
void BM_PlanDeepSeekV3_2048H100(benchmark::State& state) {
  search(state, "deepseek-v3", "dgx-h100:256", 8192, 4096, schemas::TrainingFramework::megatron_lm,
         schemas::Dtype::fp8);
}
BENCHMARK(BM_PlanDeepSeekV3_2048H100)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace
