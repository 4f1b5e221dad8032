// Slow checks of the planner's answers on real sizes (label no-sanitize: minutes under ASan).
#include <gtest/gtest.h>

#include "fixture_paths.h"
#include "strata/costmodels/collective_time.h"
#include "strata/planner/plan_search.h"
#include "strata/schemas/presets.h"
#include "strata/simulator/published_run.h"

namespace strata::planner {
namespace {

// For every complete published run: planning the same model on the same machine and global batch,
// for the stack that ran it, finds a plan at least as fast as the simulator's prediction for the
// published configuration. (For the strata framework the search is what Strata's executor runs,
// which excludes these runs' fp16.)
TEST(PlanQuality, NeverWorseThanThePublishedConfigurations) {
  // A snapshot of shared/validation/published_runs.jsonl, so that a clean clone has it.
  const std::vector<simulator::PublishedRun> runs =
      simulator::read_published_runs(strata::testing::fixture("validation/published_runs.jsonl"));
  int planned = 0;
  for (const simulator::PublishedRun& run : runs) {
    if (!run.plan) continue;
    const schemas::Plan& published = *run.plan;
    const simulator::PlanSimulation reference = simulator::simulate_plan(published, {});
    SearchOptions options;
    options.global_batch_size = published.batch.global_batch_size;
    options.seq_length = published.batch.seq_length;
    options.precision = published.precision;
    options.framework = published.framework;
    options.top_k = 1;
    const SearchResult result = search_plans(published.model, published.cluster, options);
    ASSERT_FALSE(result.best.empty()) << run.id;
    EXPECT_LE(result.best.front().metrics.step_time_s, reference.metrics.step_time_s * (1 + 1e-9))
        << run.id;
    ++planned;
  }
  EXPECT_GE(planned, 20);
}

// GPT-3 175B on 1,024 H100s at Megatron's batch of 1,536: tp stays inside the NVLink domain.
TEST(PlanQuality, Gpt3On1024H100KeepsTensorParallelismInsideANode) {
  SearchOptions options;
  options.global_batch_size = 1536;
  options.seq_length = 2048;
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100:128");
  const SearchResult result = search_plans(schemas::model_preset("gpt3-175b"), cluster, options);
  ASSERT_FALSE(result.best.empty());
  EXPECT_GE(result.statistics.enumerated, 100000);
  const schemas::Plan& best = result.best.front().plan;
  const costmodels::GroupSpan tp = costmodels::group_span(
      cluster, costmodels::first_group_ranks(best.mesh, {schemas::MeshAxis::tp}));
  EXPECT_EQ(tp.outermost_tier(), 0);
}

}  // namespace
}  // namespace strata::planner
