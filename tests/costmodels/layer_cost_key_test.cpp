// The key the planner caches layer costs by (costmodels::layer_cost_key): contexts with equal keys
// cost the same — the cp group it clears is unread under ring attention — and a context differing
// in what the costs read has another key.
#include <gtest/gtest.h>

#include "strata/costmodels/layer_costs.h"
#include "strata/costmodels/plan_costs.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

// Llama-3.1 8B with cp = 4 over 4 nodes, its cp group laid across nodes (order cp outermost) or
// inside one (cp fastest).
schemas::Plan context_parallel_plan(schemas::ContextParallelComm comm, bool cp_inside_node) {
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = 2;
  knobs.mesh.cp = 4;
  knobs.mesh.dp = 4;
  if (cp_inside_node) {
    knobs.mesh.order = {schemas::MeshAxis::cp, schemas::MeshAxis::tp, schemas::MeshAxis::dp,
                        schemas::MeshAxis::pp};
  } else {
    knobs.mesh.order = {schemas::MeshAxis::tp, schemas::MeshAxis::dp, schemas::MeshAxis::cp,
                        schemas::MeshAxis::pp};
  }
  knobs.seq_length = 8192;
  knobs.global_batch_size = 16;
  knobs.sequence_parallel = true;
  knobs.cp_comm = comm;
  return schemas::build_plan(schemas::model_preset("llama3.1-8b"),
                             schemas::cluster_preset("dgx-h100:4"), knobs, "test");
}

double layer_seconds(const LayerContext& context) {
  const LayerCostSet costs = layer_cost_set(context);
  return costs.recomputed.forward_backward_s() + costs.plain.forward_backward_s();
}

// A context points at its plan's model and cluster: the plans outlive the contexts.
TEST(LayerCostKey, RingAttentionCostsTheSameWhereverItsCpGroupSpansAndSharesAKey) {
  const schemas::Plan ring = context_parallel_plan(schemas::ContextParallelComm::ring, false);
  const schemas::Plan ring_inside = context_parallel_plan(schemas::ContextParallelComm::ring, true);
  const LayerContext spread = layer_context(ring);
  LayerContext inside = spread;
  inside.cp_span = layer_context(ring_inside).cp_span;
  ASSERT_NE(spread.cp_span, inside.cp_span) << "the two orders must lay the cp group apart";
  EXPECT_EQ(layer_cost_key(spread), layer_cost_key(inside));
  EXPECT_DOUBLE_EQ(layer_seconds(spread), layer_seconds(inside));
  // A cp group to clear: the context is not its own key; its key is.
  EXPECT_FALSE(is_layer_cost_key(spread));
  EXPECT_TRUE(is_layer_cost_key(layer_cost_key(spread)));
  EXPECT_EQ(LayerCostKeyHash{}(layer_cost_key(spread)), LayerCostKeyHash{}(layer_cost_key(inside)));
}

TEST(LayerCostKey, AllGatherAttentionReadsItsCpGroupAndKeysIt) {
  const schemas::Plan gather_spread =
      context_parallel_plan(schemas::ContextParallelComm::all_gather, false);
  const schemas::Plan gather_inside =
      context_parallel_plan(schemas::ContextParallelComm::all_gather, true);
  const LayerContext spread = layer_context(gather_spread);
  const LayerContext inside = layer_context(gather_inside);
  ASSERT_NE(spread.cp_span, inside.cp_span);
  EXPECT_NE(layer_cost_key(spread), layer_cost_key(inside));
  EXPECT_TRUE(is_layer_cost_key(spread));
  // The gathers over InfiniBand are slower than over NVLink.
  EXPECT_GT(layer_seconds(spread), layer_seconds(inside));
}

TEST(LayerCostKey, EveryOtherFieldTheCostsReadIsInTheKey) {
  const schemas::Plan plan = context_parallel_plan(schemas::ContextParallelComm::ring, false);
  const LayerContext base = layer_context(plan);
  const double base_seconds = layer_seconds(base);
  const auto changed = [&](auto change) {
    LayerContext other = base;
    change(other);
    EXPECT_NE(layer_seconds(other), base_seconds) << "the change must move the costs";
    return layer_cost_key(other) != layer_cost_key(base);
  };
  EXPECT_TRUE(changed([](LayerContext& c) { c.micro_batch_size = 2; }));
  EXPECT_TRUE(changed([](LayerContext& c) { c.cp_tier = 0; }));
  EXPECT_TRUE(changed([](LayerContext& c) { c.tp_span.levels.back().tier = 1; }));
  EXPECT_TRUE(changed([](LayerContext& c) { c.eager_issue_s_per_kernel = 1e-3; }));
  EXPECT_TRUE(changed([](LayerContext& c) { c.precision = schemas::Dtype::fp8; }));
  EXPECT_TRUE(changed([](LayerContext& c) { c.tp_comm_overlap = true; }));
}

}  // namespace
}  // namespace strata::costmodels
