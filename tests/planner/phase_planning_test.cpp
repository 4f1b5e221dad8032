// Planning a run's phases and choosing diverse strategies (planner/phase_planning.h,
// strategy_choice.h): the choice over phases is the least total of every assignment (checked
// against enumerating them all), what `plan_phases` reports adds up to what its plan set says, a
// phase nothing can plan is refused naming it, and strategies differ in their mesh with a switch
// priced between every pair — nothing between identical placements.
#include "strata/planner/phase_planning.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "strata/planner/strategy_choice.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/presets.h"

namespace strata::planner {
namespace {

using ::testing::HasSubstr;

// The search the command line makes on `cluster` (its GPU's default precision).
SearchOptions search_on(const schemas::ClusterConfig& cluster) {
  SearchOptions search;
  search.precision = schemas::default_training_precision(cluster.gpu);
  return search;
}

// Every assignment of a candidate to each phase, its total time.
double least_by_enumeration(const std::vector<std::vector<double>>& phase_seconds,
                            const std::vector<std::vector<std::vector<double>>>& switches) {
  double least = INFINITY;
  std::vector<std::size_t> at(phase_seconds.size(), 0);
  while (true) {
    double total = 0;
    for (std::size_t p = 0; p < at.size(); ++p) {
      total += phase_seconds[p][at[p]];
      if (p > 0) total += switches[p][at[p - 1]][at[p]];
    }
    least = std::min(least, total);
    std::size_t p = 0;
    while (p < at.size() && ++at[p] == phase_seconds[p].size()) at[p++] = 0;
    if (p == at.size()) return least;
  }
}

TEST(PhasePlanning, TheChoiceIsTheLeastOfEveryAssignment) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> seconds(0.0, 10.0);
  std::uniform_int_distribution<std::size_t> sizes(1, 4);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t phases = sizes(random);
    std::vector<std::vector<double>> phase_seconds(phases);
    for (auto& candidates : phase_seconds) {
      candidates.resize(sizes(random));
      for (double& value : candidates) value = seconds(random);
    }
    // Switches as costly as the phases, so that the fastest per phase is often not the answer.
    std::vector<std::vector<std::vector<double>>> switches(phases);
    for (std::size_t p = 1; p < phases; ++p) {
      switches[p].assign(phase_seconds[p - 1].size(),
                         std::vector<double>(phase_seconds[p].size(), 0));
      for (auto& row : switches[p]) {
        for (double& value : row) value = seconds(random);
      }
    }
    const std::vector<std::size_t> chosen = least_time_choice(
        phase_seconds,
        [&](std::size_t p, std::size_t from, std::size_t to) { return switches[p][from][to]; });
    ASSERT_EQ(chosen.size(), phases);
    double total = 0;
    for (std::size_t p = 0; p < phases; ++p) {
      ASSERT_LT(chosen[p], phase_seconds[p].size());
      total += phase_seconds[p][chosen[p]];
      if (p > 0) total += switches[p][chosen[p - 1]][chosen[p]];
    }
    EXPECT_NEAR(total, least_by_enumeration(phase_seconds, switches), 1e-12) << "trial " << trial;
  }
}

TEST(PhasePlanning, ASlowerPlanThatSavesASwitchWins) {
  // Phase 2's fastest candidate (1) is 1 s faster but 5 s away from phase 1's only plan.
  const std::vector<std::size_t> chosen = least_time_choice(
      {{10.0}, {8.0, 7.0}},
      [](std::size_t, std::size_t, std::size_t to) { return to == 1 ? 5.0 : 0.0; });
  EXPECT_EQ(chosen, (std::vector<std::size_t>{0, 0}));
}

schemas::TrainingPhases context_extension() {
  schemas::TrainingPhases phases;
  phases.phases = {{"short", 3, 8, 64}, {"long", 2, 1, 256}, {"wide", 2, 16, 32}};
  return phases;
}

TEST(PhasePlanning, WhatItReportsAddsUpToItsPlanSet) {
  const schemas::ModelConfig model = schemas::model_preset("gpt-tiny");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("cpu-local:4");
  const schemas::TrainingPhases phases = context_extension();
  const PhasedPlan planned = plan_phases(model, cluster, phases, "phases.json", search_on(cluster));
  ASSERT_EQ(planned.phases.size(), 3u);
  double steps = 0, switches = 0;
  std::int64_t first_step = 0;
  for (std::size_t p = 0; p < planned.phases.size(); ++p) {
    const PlannedPhase& phase = planned.phases[p];
    const schemas::Plan& plan = phase.chosen.plan;
    EXPECT_EQ(phase.first_step, first_step);
    EXPECT_EQ(plan.batch.global_batch_size, phases.phases[p].global_batch_size);
    EXPECT_EQ(plan.batch.seq_length, phases.phases[p].seq_length);
    EXPECT_EQ(plan.mesh.world_size(), 4);
    EXPECT_DOUBLE_EQ(phase.steps_seconds, static_cast<double>(phases.phases[p].steps) *
                                              phase.chosen.metrics.step_time_s);
    EXPECT_EQ(phase.switch_in.has_value(), p > 0);
    steps += phase.steps_seconds;
    if (phase.switch_in) switches += phase.switch_in->seconds;
    first_step += phases.phases[p].steps;
    EXPECT_EQ(planned.set.plans[p].id, phases.phases[p].name);
    EXPECT_EQ(planned.set.phases[p].first_step, phase.first_step);
    EXPECT_EQ(planned.set.phases[p].plan, phases.phases[p].name);
  }
  EXPECT_NEAR(planned.total_seconds, steps + switches, 1e-12);
  EXPECT_NEAR(planned.switch_seconds, switches, 1e-12);
  EXPECT_LE(planned.total_seconds, planned.each_fastest_seconds + 1e-12);
  EXPECT_EQ(planned.set.total_steps, phases.total_steps());
  ASSERT_EQ(planned.set.switches.size(), 2u);
  EXPECT_EQ(planned.set.switches[0].from, "short");
  EXPECT_EQ(planned.set.switches[0].to, "long");
  EXPECT_DOUBLE_EQ(planned.set.switches[1].seconds, planned.phases[2].switch_in->seconds);
  // The set is a valid document: it parses back to what was written.
  const schemas::PlanSet parsed = schemas::parse_plan_set(schemas::plan_set_to_json(planned.set),
                                                          schemas::JsonLocation("set.json"));
  EXPECT_EQ(schemas::plan_set_to_json(parsed), schemas::plan_set_to_json(planned.set));
}

TEST(PhasePlanning, APhaseNothingCanPlanIsRefusedNamingIt) {
  const schemas::ModelConfig model = schemas::model_preset("gpt-tiny");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("cpu-local:4");
  schemas::TrainingPhases phases = context_extension();
  phases.phases[1].seq_length = 512;
  try {
    plan_phases(model, cluster, phases, "phases.json", search_on(cluster));
    FAIL() << "a sequence past the model's was planned";
  } catch (const schemas::InputError& error) {
    EXPECT_STREQ(error.what(),
                 "phases.json: /phases/1/seq_length: 512 is more than gpt-tiny's "
                 "max_seq_length=256");
  }
  // 8 billion parameters' state is far more than four 4 GiB CPU "devices" hold.
  try {
    plan_phases(schemas::model_preset("llama3.1-8b"), cluster, context_extension(), "phases.json",
                search_on(cluster));
    FAIL() << "a model no layout fits was planned";
  } catch (const schemas::InputError& error) {
    EXPECT_THAT(error.what(), HasSubstr("phases.json: /phases/0: phase \"short\" (8 × 64 tokens): "
                                        "no plan fits: "));
  }
}

TEST(StrategyChoice, StrategiesDifferInTheirMeshAndEachPairIsPriced) {
  const schemas::ModelConfig model = schemas::model_preset("gpt-tiny");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("cpu-local:8");
  SearchOptions search = search_on(cluster);
  search.global_batch_size = 16;
  search.seq_length = 64;
  search.top_k = 40;
  const SearchResult result = search_plans(model, cluster, search);
  const std::vector<RankedPlan> strategies = diverse_strategies(result.best, 4);
  ASSERT_EQ(strategies.size(), 4u);
  EXPECT_EQ(schemas::plan_to_json(strategies.front().plan),
            schemas::plan_to_json(result.best.front().plan));
  std::set<std::string> meshes;
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    const schemas::Mesh& mesh = strategies[i].plan.mesh;
    EXPECT_TRUE(
        meshes.insert(fmt::format("{}/{}/{}/{}", mesh.tp, mesh.cp, mesh.pp, mesh.dp)).second)
        << layout_id(strategies[i].plan);
    if (i > 0) {
      EXPECT_GE(strategies[i].metrics.step_time_s, strategies[i - 1].metrics.step_time_s);
    }
  }
  const schemas::PlanSet set = strategy_set(strategies, "four strategies");
  ASSERT_EQ(set.plans.size(), 4u);
  EXPECT_EQ(set.switches.size(), 12u);
  EXPECT_TRUE(set.phases.empty());
  for (const schemas::PlanSwitchCost& cost : set.switches) {
    EXPECT_NE(cost.from, cost.to);
    const schemas::Plan& from = set.find(cost.from)->plan;
    const schemas::Plan& to = set.find(cost.to)->plan;
    // ZeRO shards over cp · dp: regrouping those ranks between cp and dp keeps every rank's
    // elements, while another tp or ZeRO stage sends some to other ranks.
    if (from.mesh.tp == to.mesh.tp && from.mesh.pp == to.mesh.pp &&
        from.mesh.cp * from.mesh.dp == to.mesh.cp * to.mesh.dp &&
        from.zero_stage == to.zero_stage) {
      EXPECT_EQ(cost.most_received_bytes, 0) << cost.from << " -> " << cost.to;
      EXPECT_EQ(cost.seconds, 0) << cost.from << " -> " << cost.to;
    } else {
      EXPECT_GT(cost.most_received_bytes, 0) << cost.from << " -> " << cost.to;
      EXPECT_GT(cost.seconds, 0) << cost.from << " -> " << cost.to;
    }
  }
  // A plan to itself moves nothing.
  const SwitchPrediction same = predict_switch(strategies[1].plan, strategies[1].plan);
  EXPECT_EQ(same.most_sent_bytes, 0);
  EXPECT_EQ(same.most_received_bytes, 0);
  EXPECT_EQ(same.seconds, 0);
}

TEST(StrategyChoice, LayoutIdsNameTheAxesAboveOne) {
  schemas::Plan plan;
  plan.mesh.tp = 2;
  plan.mesh.pp = 2;
  plan.mesh.dp = 2;
  EXPECT_EQ(layout_id(plan), "tp2-pp2-dp2");
  plan.zero_stage = 1;
  plan.mesh = {};
  plan.mesh.dp = 8;
  EXPECT_EQ(layout_id(plan), "dp8-z1");
  plan.mesh = {};
  plan.zero_stage = 0;
  EXPECT_EQ(layout_id(plan), "single");
}

}  // namespace
}  // namespace strata::planner
