// How long reading and checking a plan takes. The planner checks every plan it emits with the
// same validate_plan, and `strata validate` parses whole files; both must stay far below the
// planner's budget of about 100 microseconds per scored candidate.
//   build/test/bench/schemas_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include "strata/schemas/json_file.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/presets.h"

namespace strata::schemas {
namespace {

// GPT-3 175B on 1,024 A100s with 48 interleaved stages: the largest plan fixture.
const std::string& plan_text() {
  static const std::string text = read_text_file(std::string(STRATA_FIXTURES_DIR) +
                                                 "/plan/valid/gpt3-175b-a100-interleaved.json");
  return text;
}

void BM_ParseJsonText(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(parse_json_text(plan_text(), "plan.json"));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * plan_text().size()));
}
BENCHMARK(BM_ParseJsonText);

void BM_ParsePlan(benchmark::State& state) {  // JSON text to a checked Plan, with content hash
  for (auto _ : state) {
    const nlohmann::json document = parse_json_text(plan_text(), "plan.json");
    benchmark::DoNotOptimize(parse_plan(document, JsonLocation("plan.json")));
  }
}
BENCHMARK(BM_ParsePlan);

void BM_ValidatePlan(benchmark::State& state) {  // the semantic rules alone, on a parsed plan
  const Plan plan =
      parse_plan(parse_json_text(plan_text(), "plan.json"), JsonLocation("plan.json"));
  for (auto _ : state) {
    validate_plan(plan, JsonLocation("plan.json"));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ValidatePlan);

void BM_PlanToJson(benchmark::State& state) {
  const Plan plan =
      parse_plan(parse_json_text(plan_text(), "plan.json"), JsonLocation("plan.json"));
  for (auto _ : state) benchmark::DoNotOptimize(plan_to_json(plan).dump());
}
BENCHMARK(BM_PlanToJson);

void BM_ModelPreset(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(model_preset("llama3.1-405b"));
}
BENCHMARK(BM_ModelPreset);

}  // namespace
}  // namespace strata::schemas
