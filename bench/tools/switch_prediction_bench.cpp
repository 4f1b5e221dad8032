// Pricing one layout switch (planner/switch_pricing.h): the whole transfer plan is built — every
// old rank's state boxes listed, every new rank's covered from them — which is what `strata plan
// --phases` and `--strategies` pay per pair of placements. Its cost grows with ranks × boxes per
// rank (a few per parameter) × the holders of each parameter. Llama-3.1 8B, ZeRO-1 tp 2 · dp N/2
// to tp 1 · dp N, on 8, 16, 32, 512 and 1,024 H100s.
#include <benchmark/benchmark.h>

#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "strata/planner/switch_pricing.h"

namespace {

using namespace strata;

schemas::Plan layout(std::int64_t nodes, std::int64_t tp) {
  const schemas::ClusterConfig cluster =
      schemas::cluster_preset("dgx-h100:" + std::to_string(nodes));
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = tp;
  knobs.mesh.dp = cluster.world_size() / tp;
  knobs.zero_stage = 1;
  knobs.seq_length = 8192;
  knobs.global_batch_size = 2 * cluster.world_size();
  return schemas::build_plan(schemas::model_preset("llama3.1-8b"), cluster, knobs, "bench");
}

void BM_PredictSwitchLlama8B(benchmark::State& state) {
  const schemas::Plan from = layout(state.range(0), 2);
  const schemas::Plan to = layout(state.range(0), 1);
  planner::SwitchPrediction prediction;
  for (auto _ : state) {
    prediction = planner::predict_switch(from, to);
    benchmark::DoNotOptimize(prediction);
  }
  state.counters["ranks"] = static_cast<double>(from.mesh.world_size());
  state.counters["most_received_GB"] = static_cast<double>(prediction.most_received_bytes) / 1e9;
  state.counters["predicted_ms"] = prediction.seconds * 1e3;
}
BENCHMARK(BM_PredictSwitchLlama8B)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(64)
    ->Arg(128)
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
