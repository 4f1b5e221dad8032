// The gradient buckets the simulator prices are the buckets the executor reduces. For random valid
// plans of dense and mixture-of-experts models — dp, cp, hybrid shards, ZeRO 0–3, ep and etp,
// pipelines with and without virtual stages, bucket sizes from a few elements to the whole model
// — each pipeline rank's bucket count in the simulation (what the training log prints as
// "predicted") equals the count of buckets the sharded optimizer forms on the first rank of that
// pipeline rank's tp, ep and etp groups.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "executor_models.h"
#include "random_plans.h"
#include "strata/executor/zero/bucket_layout.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "strata/simulator/plan_simulation.h"

namespace strata::executor {
namespace {

// The buckets of pipeline rank `pp_rank`'s first rank, as the trainer's optimizer forms them: its
// stages are every pp-th of the plan's (interleaved virtual stages), its store the parameter
// table's slices at tp, ep and etp rank 0.
std::vector<BucketRange> executor_buckets(const schemas::Plan& plan, std::int64_t pp_rank) {
  std::vector<schemas::PipelineStage> stages;
  for (std::size_t s = static_cast<std::size_t>(pp_rank); s < plan.stages.size();
       s += static_cast<std::size_t>(plan.mesh.pp)) {
    stages.push_back(plan.stages[s]);
  }
  const ParameterStore store(stage_parameters(plan.model, stages), ScalarType::float32, Device::cpu,
                             std::nullopt,
                             StoreOptions{.tensor_parallel_size = plan.mesh.tp,
                                          .own_values = false,
                                          .own_gradients = false,
                                          .expert_parallel_size = plan.mesh.ep,
                                          .expert_tensor_parallel_size = plan.mesh.etp});
  return rank_bucket_layout(plan.model, store, stages, plan.mesh, plan.zero_stage,
                            layout::gradient_bucket_elements(plan));
}

TEST(BucketPrediction, TheSimulatorPricesTheBucketsTheExecutorReduces) {
  const std::vector<schemas::ModelConfig> models = {
      schemas::model_preset("gpt-tiny"), schemas::model_preset("llama-tiny"),
      schemas::model_preset("moe-tiny"), testing::odd_gpt(3, true)};
  strata::testing::RandomPlans plans(20261129);
  int checked = 0, with_experts_apart = 0, pipelines = 0;
  for (int attempt = 0; attempt < 2000 && checked < 150; ++attempt) {
    const schemas::ModelConfig& model = models[static_cast<std::size_t>(attempt) % models.size()];
    const std::optional<schemas::Plan> drawn = plans.draw(model);
    // Without dp or cp there are no data-parallel buckets to compare.
    if (!drawn || drawn->mesh.dp * drawn->mesh.cp == 1) continue;
    const schemas::Plan& plan = *drawn;
    const simulator::PlanSimulation simulation = simulator::simulate_plan(plan, ".");
    const std::vector<std::size_t> predicted =
        simulator::gradient_buckets_per_pipeline_rank(plan, simulation);
    const std::string what = fmt::format(
        "{}: tp {} cp {} dp {} (shards of {}) pp {} vpp {} ep {} etp {}, ZeRO-{}, buckets of {}",
        model.name, plan.mesh.tp, plan.mesh.cp, plan.mesh.dp, plan.mesh.dp_shard, plan.mesh.pp,
        plan.mesh.vpp, plan.mesh.ep, plan.mesh.etp, plan.zero_stage,
        layout::gradient_bucket_elements(plan));
    for (std::int64_t pp_rank = 0; pp_rank < plan.mesh.pp; ++pp_rank) {
      const std::vector<BucketRange> buckets = executor_buckets(plan, pp_rank);
      ASSERT_EQ(predicted[static_cast<std::size_t>(pp_rank)], buckets.size())
          << what << ", pipeline rank " << pp_rank;
    }
    ++checked;
    with_experts_apart += layout::experts_reduced_apart(plan.mesh);
    pipelines += plan.mesh.pp > 1;
  }
  EXPECT_GE(checked, 100);
  EXPECT_GE(with_experts_apart, 15) << "the case of the drift: routed experts reduced apart";
  EXPECT_GE(pipelines, 20);
}

// The two runs: moe-tiny on dp 2 (the experts share the dense buckets: one bucket, where
// the cost model used to price two) and on ep 2 with ZeRO-1 and buckets of 30,000 elements.
TEST(BucketPrediction, MixtureOfExpertsRunsOfTheDriftPredictTheirBuckets) {
  const schemas::ModelConfig model = schemas::model_preset("moe-tiny");
  for (const std::int64_t ep : {1, 2}) {
    schemas::PlanKnobs knobs;
    knobs.mesh = schemas::Mesh{.dp = 2, .ep = ep};
    knobs.zero_stage = ep > 1 ? 1 : 0;
    if (ep > 1) knobs.gradient_bucket_elements = 30'000;
    knobs.precision = schemas::Dtype::fp32;
    knobs.seq_length = 64;
    knobs.global_batch_size = 8;
    const schemas::Plan plan =
        schemas::build_plan(model, schemas::cluster_preset("cpu-local:2"), knobs, "test");
    const simulator::PlanSimulation simulation = simulator::simulate_plan(plan, ".");
    const std::vector<BucketRange> buckets = executor_buckets(plan, 0);
    EXPECT_EQ(simulator::gradient_buckets_per_pipeline_rank(plan, simulation).front(),
              buckets.size())
        << "ep " << ep;
    const bool any_expert_bucket =
        std::any_of(buckets.begin(), buckets.end(), [](const BucketRange& b) { return b.experts; });
    EXPECT_EQ(any_expert_bucket, ep > 1) << "ep " << ep;
  }
}

}  // namespace
}  // namespace strata::executor
