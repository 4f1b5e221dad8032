// Merging mesh orders is sound: whenever distinct_orders keeps one order for another, every
// candidate the dropped order stands for — each ZeRO stage, all of dp or hybrid shard blocks,
// each expert mesh — prices exactly as the kept order's (the same simulated step time). Random
// meshes of dense and mixture-of-experts models on one to eight nodes, hybrid sharding included,
// whose shard groups the order can move across nodes while the dp·cp group stays put.
#include "strata/planner/mesh_orders.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "strata/simulator/plan_simulation.h"

namespace strata::planner {
namespace {

// The simulated step time of `model` on `cluster` with this mesh, ZeRO stage and shards; a
// negative value where the plan is not valid.
double step_time(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
                 schemas::Mesh mesh, std::int64_t zero_stage) {
  schemas::PlanKnobs knobs;
  knobs.mesh = mesh;
  knobs.zero_stage = zero_stage;
  knobs.sequence_parallel = mesh.tp > 1;
  knobs.seq_length = 1024;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 4 * mesh.dp;
  try {
    const schemas::Plan plan = schemas::build_plan(model, cluster, knobs, "test");
    return simulator::simulate_plan(plan, ".").metrics.step_time_s;
  } catch (const schemas::InputError&) {
    return -1;
  }
}

TEST(MeshOrders, OrdersMergedIntoOneCandidatePriceEveryCandidateAlike) {
  std::mt19937 random(20261129);
  const auto pick = [&](std::initializer_list<std::int64_t> values) {
    std::vector<std::int64_t> choices(values);
    return choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(random)];
  };
  const std::vector<MeshOrder> orders = all_orders();
  int compared = 0, merged = 0, priced = 0, hybrid = 0;
  for (int attempt = 0; attempt < 400 && compared < 40; ++attempt) {
    const schemas::ModelConfig model =
        schemas::model_preset(attempt % 3 == 2 ? "mixtral-8x7b" : "llama3.1-8b");
    const std::int64_t nodes = pick({1, 2, 4, 8});
    const schemas::ClusterConfig cluster =
        schemas::cluster_preset(fmt::format("dgx-h100:{}", nodes));
    const std::int64_t world = cluster.world_size();
    const std::int64_t tp = pick({1, 2, 4});
    const std::int64_t cp = pick({1, 1, 2});
    const std::int64_t pp = pick({1, 2, 4});
    if (world % (tp * cp * pp) != 0) continue;
    const std::int64_t dp = world / (tp * cp * pp);
    std::vector<std::int64_t> dp_shards{0};
    if (const std::int64_t block = node_shard_block(cluster, tp, cp, dp); block > 0) {
      dp_shards.push_back(block);
    }
    std::vector<std::pair<std::int32_t, std::int32_t>> expert_meshes{{1, 1}};
    if (model.moe && (tp * cp * dp) % 2 == 0) expert_meshes.emplace_back(2, 1);
    const std::vector<std::int16_t> kept =
        distinct_orders(cluster, model, orders, tp, cp, dp, pp, dp_shards, expert_meshes);
    ASSERT_FALSE(kept.empty());
    ASSERT_EQ(kept.front(), 0) << "the default order is always kept";
    // Three dropped orders, drawn at random, each against the kept order it was merged into (the
    // kept order with which it alone is one kind).
    std::vector<std::size_t> dropped;
    for (std::size_t j = 0; j < orders.size(); ++j) {
      if (std::find(kept.begin(), kept.end(), static_cast<std::int16_t>(j)) == kept.end()) {
        dropped.push_back(j);
      }
    }
    std::shuffle(dropped.begin(), dropped.end(), random);
    if (dropped.size() > 3) dropped.resize(3);
    for (const std::size_t j : dropped) {
      std::int16_t into = -1;
      for (const std::int16_t i : kept) {
        if (static_cast<std::size_t>(i) > j) break;
        if (distinct_orders(cluster, model, {orders[static_cast<std::size_t>(i)], orders[j]}, tp,
                            cp, dp, pp, dp_shards, expert_meshes)
                .size() == 1) {
          into = i;
          break;
        }
      }
      ASSERT_GE(into, 0) << "order " << j << " was dropped for no kept order";
      ++merged;
      // One candidate of each kind is enough to see a price differ: the largest sharding.
      for (const std::int64_t dp_shard : dp_shards) {
        for (const auto& [ep, etp] : expert_meshes) {
          const std::int64_t zero = dp_shard > 0 ? 3 : pick({0, 1, 3});
          schemas::Mesh mesh{tp,       cp, dp, pp, 1, orders[static_cast<std::size_t>(into)],
                             dp_shard, ep, etp};
          const double kept_time = step_time(model, cluster, mesh, zero);
          mesh.order = orders[j];
          EXPECT_EQ(step_time(model, cluster, mesh, zero), kept_time)
              << model.name << " on " << cluster.name << ": tp " << tp << " cp " << cp << " dp "
              << dp << " pp " << pp << " shards of " << dp_shard << " ep " << ep << " ZeRO-" << zero
              << ", order " << j << " merged into order " << into;
          if (kept_time > 0) {
            ++priced;
            hybrid += dp_shard > 0;
          }
        }
      }
      if (::testing::Test::HasFailure()) return;
    }
    ++compared;
  }
  EXPECT_GE(compared, 30);
  EXPECT_GE(merged, 60);
  EXPECT_GE(priced, 60) << "valid plans priced in both orders";
  EXPECT_GE(hybrid, 10) << "hybrid shard blocks, which the old key ignored";
}

}  // namespace
}  // namespace strata::planner
