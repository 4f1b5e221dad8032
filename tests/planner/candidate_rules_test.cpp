// What the planner keeps, validation allows, and where it leaves a choice out by a rule,
// validation refuses it by that rule. For searches of dense and mixture-of-experts models on CPU
// and H100 clusters, with the strata executor's and Megatron-LM's stacks: every candidate the
// evaluator builds into a plan (before any memory or time is weighed) passes validate_plan, and
// wherever it leaves the experts' all-to-all overlap off, asking for it is refused by validation
// exactly when the rule's predicate refuses it, at that rule's path and with its words.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "candidate.h"
#include "candidate_evaluator.h"
#include "strata/planner/mesh_orders.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_rules.h"
#include "strata/schemas/presets.h"

namespace strata::planner {
namespace {

struct Search {
  const char* model;
  const char* cluster;
  schemas::TrainingFramework framework;
  std::int64_t global_batch, seq_length;
};

TEST(CandidateRules, WhatThePlannerKeepsValidationAllowsAndWhatItDropsItRefuses) {
  const std::vector<Search> searches{
      {"gpt-tiny", "cpu-local:8", schemas::TrainingFramework::strata, 16, 64},
      {"llama-tiny", "cpu-local:8", schemas::TrainingFramework::strata, 16, 128},
      {"moe-tiny", "cpu-local:8", schemas::TrainingFramework::strata, 16, 64},
      {"moe-tiny", "dgx-h100:2", schemas::TrainingFramework::megatron_lm, 64, 64},
      {"llama-tiny", "dgx-h100:1", schemas::TrainingFramework::megatron_lm, 32, 128}};
  const std::vector<MeshOrder> orders = all_orders();
  int kept = 0, overlap_kept = 0, overlap_refused = 0;
  for (const Search& search : searches) {
    const schemas::ModelConfig model = schemas::model_preset(search.model);
    const schemas::ClusterConfig cluster = schemas::cluster_preset(search.cluster);
    SearchOptions options;
    options.precision = schemas::default_training_precision(cluster.gpu);
    options.framework = search.framework;
    options.global_batch_size = search.global_batch;
    options.seq_length = search.seq_length;
    std::int64_t pruned = 0;
    const std::vector<search::Knobs> candidates =
        search::enumerate(model, cluster, options, orders, &pruned);
    // No memory limit: every candidate the rules allow is built into a plan.
    search::Evaluator evaluator(model, cluster, options, orders,
                                std::numeric_limits<double>::infinity());
    for (std::size_t i = 0; i < candidates.size(); i += 1 + candidates.size() / 400) {
      double peak = 0;
      const search::Verdict verdict = evaluator.build(candidates[i], &peak);
      if (verdict != search::Verdict::ok) continue;
      schemas::Plan plan = evaluator.plan();
      const std::string what = fmt::format("{} on {}: {}", search.model, search.cluster,
                                           schemas::plan_to_json(plan)["mesh"].dump());
      EXPECT_NO_THROW(schemas::validate_plan(plan, schemas::JsonLocation("plan"))) << what;
      ++kept;
      overlap_kept += plan.ep_comm_overlap;
      if (plan.ep_comm_overlap || !plan.model.moe || plan.mesh.pp == 1) continue;
      // Left off: asking for it is refused exactly when the rule says so, by that rule.
      plan.ep_comm_overlap = true;
      const std::optional<schemas::PlanRefusal> refusal = schemas::ep_comm_overlap_refusal(plan);
      try {
        schemas::validate_plan(plan, schemas::JsonLocation("plan"));
        EXPECT_FALSE(refusal.has_value()) << what << ": " << refusal->rule;
      } catch (const schemas::InputError& error) {
        ASSERT_TRUE(refusal.has_value()) << what << ": " << error.what();
        EXPECT_EQ(error.json_path(), refusal->json_path) << what;
        EXPECT_EQ(error.rule(), refusal->rule) << what;
        ++overlap_refused;
      }
    }
  }
  EXPECT_GE(kept, 150);
  EXPECT_GE(overlap_kept, 1) << "Megatron-LM's interleaved expert plans overlap";
  EXPECT_GE(overlap_refused, 10);
}

}  // namespace
}  // namespace strata::planner
