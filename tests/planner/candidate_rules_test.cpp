// What the planner keeps, validation allows, and where it leaves a choice out by a rule,
// validation refuses it by that rule. For searches of dense and mixture-of-experts models on CPU
// and H100 clusters, with the strata executor's and Megatron-LM's stacks: every candidate the
// evaluator builds into a plan (before any memory or time is weighed) passes validate_plan, and
// wherever it leaves the experts' all-to-all overlap off, asking for it is refused by validation
// exactly when the rule's predicate refuses it, at that rule's path and with its words. And every
// candidate the enumeration refuses by a rule, made into a plan, is refused by validation with
// that rule: its path and its words.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
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

SearchOptions options_of(const Search& search, const schemas::ClusterConfig& cluster) {
  SearchOptions options;
  options.precision = schemas::default_training_precision(cluster.gpu);
  options.framework = search.framework;
  options.global_batch_size = search.global_batch;
  options.seq_length = search.seq_length;
  return options;
}

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
    const SearchOptions options = options_of(search, cluster);
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

// The plan a refused candidate would have been: its knobs, the search's batch, even stages.
schemas::Plan plan_of(const search::Knobs& knobs, const schemas::ModelConfig& model,
                      const schemas::ClusterConfig& cluster, const SearchOptions& options,
                      const std::vector<MeshOrder>& orders) {
  schemas::Plan plan;
  plan.model = model;
  plan.cluster = cluster;
  plan.precision = options.precision;
  plan.framework = options.framework;
  plan.mesh = {knobs.tp,       knobs.cp, knobs.dp, knobs.pp, knobs.vpp, orders[knobs.order],
               knobs.dp_shard, knobs.ep, knobs.etp};
  plan.batch = {options.seq_length, knobs.micro_batch, options.global_batch_size,
                options.global_batch_size / (knobs.micro_batch * knobs.dp)};
  plan.sequence_parallel = knobs.sequence_parallel;
  plan.zero_stage = knobs.zero;
  plan.recompute = {knobs.recompute, {}, {}};
  plan.schedule = {knobs.schedule, {}};
  plan.stages = schemas::even_pipeline_stages(model.num_layers, knobs.pp * knobs.vpp);
  return plan;
}

TEST(CandidateRules, WhatTheEnumerationRefusesValidationRefusesByTheSameRule) {
  // Small global batches and a sequence 2·cp = 16 does not divide, so that every rule the
  // enumeration asks refuses some candidates.
  const std::vector<Search> searches{
      {"gpt-tiny", "cpu-local:8", schemas::TrainingFramework::strata, 8, 40},
      {"llama-tiny", "cpu-local:8", schemas::TrainingFramework::strata, 12, 72},
      {"moe-tiny", "cpu-local:8", schemas::TrainingFramework::strata, 16, 64},
      {"moe-tiny", "dgx-h100:2", schemas::TrainingFramework::megatron_lm, 24, 40}};
  const std::vector<MeshOrder> orders = all_orders();
  std::map<std::string, int> refused_at;  // JSON path → refused candidates checked
  for (const Search& search : searches) {
    const schemas::ModelConfig model = schemas::model_preset(search.model);
    const schemas::ClusterConfig cluster = schemas::cluster_preset(search.cluster);
    const SearchOptions options = options_of(search, cluster);
    std::int64_t pruned = 0, seen = 0;
    search::enumerate(model, cluster, options, orders, &pruned,
                      [&](const search::Knobs& knobs, const schemas::PlanRefusal& refusal) {
                        ++seen;
                        const schemas::Plan plan = plan_of(knobs, model, cluster, options, orders);
                        const auto what = [&] {
                          return fmt::format("{} on {}: {} refused at {}: {}", search.model,
                                             search.cluster,
                                             schemas::plan_to_json(plan)["mesh"].dump(),
                                             refusal.json_path, refusal.rule);
                        };
                        try {
                          schemas::validate_plan(plan, schemas::JsonLocation("plan"));
                          ADD_FAILURE() << what() << ": validation allows it";
                        } catch (const schemas::InputError& error) {
                          EXPECT_EQ(error.json_path(), refusal.json_path) << what();
                          EXPECT_EQ(error.rule(), refusal.rule) << what();
                          ++refused_at[refusal.json_path];
                        }
                      });
    EXPECT_EQ(seen, pruned) << search.model << " on " << search.cluster;
  }
  for (const char* path :
       {"/mesh/tp", "/mesh/cp", "/batch/micro_batch_size", "/batch/global_batch_size",
        "/sequence_parallel", "/batch/num_micro_batches"}) {
    EXPECT_GE(refused_at[path], 1) << "no candidate refused at " << path;
  }
}

}  // namespace
}  // namespace strata::planner
