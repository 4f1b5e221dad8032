#include "strata/costmodels/plan_costs.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/mesh_ranks.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using schemas::TrainingFramework;

// GPT-2 774M on 4 H100 nodes, tp 2 · pp 2 · dp 8, ZeRO-1 in bf16, no sequence parallelism.
schemas::Plan zero1_plan(TrainingFramework framework, bool sequence_parallel = false) {
  schemas::PlanKnobs knobs;
  knobs.mesh = {.tp = 2, .cp = 1, .dp = 8, .pp = 2};
  knobs.seq_length = 1024;
  knobs.micro_batch_size = 2;
  knobs.global_batch_size = 64;
  knobs.sequence_parallel = sequence_parallel;
  knobs.zero_stage = 1;
  knobs.precision = schemas::Dtype::bf16;
  knobs.framework = framework;
  return schemas::build_plan(schemas::model_preset("gpt2-774m"),
                             schemas::cluster_preset("dgx-h100:4"), knobs, "test");
}

// GPT-2 774M on one H100 (micro-batch 1 of 1,024 tokens, 8 a step), its HBM at the full
// datasheet bandwidth (no efficiency curve), so a memory-bound pass costs bytes / 3,350 GB/s.
schemas::Plan one_h100_plan(schemas::Dtype precision) {
  schemas::PlanKnobs knobs;
  knobs.seq_length = 1024;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 8;
  knobs.precision = precision;
  schemas::Plan plan = schemas::build_plan(schemas::model_preset("gpt2-774m"),
                                           schemas::cluster_preset("dgx-h100:1x1"), knobs, "test");
  plan.cluster.gpu.hbm_efficiency_by_bytes.clear();
  return plan;
}

// Megatron splits the [2·1024 × 1280] bf16 activation across the two tp ranks before a pipeline
// send; DeepSpeed's pipeline engine sends it whole from each, so each send moves twice the bytes.
TEST(PlanCosts, DeepSpeedSendsWholeActivationsFromEveryTpRank) {
  const schemas::Plan strata = zero1_plan(TrainingFramework::strata);
  const schemas::Plan deepspeed = zero1_plan(TrainingFramework::megatron_deepspeed);
  const double activation_bytes = 2.0 * 1024 * 1280 * 2;
  const int tier =
      tier_between(strata.cluster, 0, schemas::axis_stride(strata.mesh, schemas::MeshAxis::pp));
  EXPECT_DOUBLE_EQ(plan_costs(strata).stages[0].send_forward_s,
                   point_to_point_time_s(strata.cluster, tier, activation_bytes / 2));
  EXPECT_DOUBLE_EQ(plan_costs(deepspeed).stages[0].send_forward_s,
                   point_to_point_time_s(strata.cluster, tier, activation_bytes));
  EXPECT_DOUBLE_EQ(plan_costs(deepspeed).stages[1].send_backward_s,
                   point_to_point_time_s(strata.cluster, tier, activation_bytes));
  // Under sequence parallelism each tp rank holds only its half: the same bytes either way.
  EXPECT_DOUBLE_EQ(
      plan_costs(zero1_plan(TrainingFramework::megatron_deepspeed, true)).stages[0].send_forward_s,
      plan_costs(zero1_plan(TrainingFramework::strata, true)).stages[0].send_forward_s);
}

// What the planner's bound reads is the same at step_bound as in full; the rest is left empty.
TEST(PlanCosts, StepBoundDetailKeepsWhatTheBoundReadsAndSkipsTheRest) {
  for (const schemas::Plan& plan :
       {zero1_plan(TrainingFramework::strata), zero1_plan(TrainingFramework::megatron_lm, true)}) {
    const PlanCosts full = plan_costs(plan);
    const PlanCosts bound = plan_costs(plan, nullptr, CostDetail::step_bound);
    ASSERT_EQ(bound.stages.size(), full.stages.size());
    for (std::size_t s = 0; s < full.stages.size(); ++s) {
      EXPECT_EQ(bound.stages[s].passes.forward_backward_s(),
                full.stages[s].passes.forward_backward_s());
      EXPECT_EQ(bound.stages[s].passes.forward.total_s(), full.stages[s].passes.forward.total_s());
      EXPECT_EQ(bound.stages[s].send_forward_s, full.stages[s].send_forward_s);
      EXPECT_EQ(bound.stages[s].send_backward_s, full.stages[s].send_backward_s);
      EXPECT_FALSE(full.stages[s].gradient_buckets_s.empty());
      EXPECT_TRUE(bound.stages[s].gradient_buckets_s.empty());
    }
    EXPECT_EQ(bound.optimizer_step_s, full.optimizer_step_s)
        << "ZeRO-1's weight all-gather over the shard group is part of the step";
    EXPECT_EQ(bound.tied_embedding_grad_s, full.tied_embedding_grad_s);
    EXPECT_EQ(bound.model_flops_per_step, 0.0);
  }
}

// Under ZeRO-1 in bf16 a gradient bucket of P parameters is reduce-scattered as 4·P bytes of fp32
// accumulators (Megatron's distributed optimizer), or all-reduced whole (DeepSpeed's
// BF16_Optimizer): each bucket costs the all-reduce of the same bytes.
TEST(PlanCosts, DeepSpeedAllReducesFp32GradientsUnderZeroOne) {
  const schemas::Plan strata = zero1_plan(TrainingFramework::megatron_lm);
  const schemas::Plan deepspeed = zero1_plan(TrainingFramework::deepspeed);
  const GroupSpan dp_span =
      group_span(strata.cluster,
                 first_group_ranks(strata.mesh, {schemas::MeshAxis::dp, schemas::MeshAxis::cp}));
  const PlanCosts strata_costs = plan_costs(strata);
  const PlanCosts deepspeed_costs = plan_costs(deepspeed);
  ASSERT_EQ(strata_costs.stages[0].gradient_buckets_s.size(),
            deepspeed_costs.stages[0].gradient_buckets_s.size());
  // The stage's ~390M/2 parameters fill buckets of 40M: all but the last are full.
  const double bucket_bytes = 40e6 * 4;
  EXPECT_DOUBLE_EQ(
      strata_costs.stages[0].gradient_buckets_s[0],
      collective_time_s(strata.cluster, dp_span, Collective::reduce_scatter, bucket_bytes));
  EXPECT_DOUBLE_EQ(
      deepspeed_costs.stages[0].gradient_buckets_s[0],
      collective_time_s(strata.cluster, dp_span, Collective::all_reduce, bucket_bytes));
  EXPECT_GT(deepspeed_costs.stages[0].gradient_buckets_s[0],
            1.5 * strata_costs.stages[0].gradient_buckets_s[0]);
  // NeMo and the FSDP stacks fill buckets as Megatron-LM does.
  for (TrainingFramework same :
       {TrainingFramework::nemo, TrainingFramework::torchtitan, TrainingFramework::llm_foundry}) {
    const PlanCosts costs = plan_costs(zero1_plan(same));
    EXPECT_EQ(costs.stages[0].gradient_buckets_s, strata_costs.stages[0].gradient_buckets_s);
    EXPECT_EQ(costs.stages[0].send_forward_s, strata_costs.stages[0].send_forward_s);
  }
}

// Gradients in bf16 (the plan's gradient_dtype; Megatron-Bridge's recipes) are half the fp32
// default's bytes: in the rank's gradient buffer and in every bucket's reduce-scatter (40M
// parameters × 2 bytes over the same dp group); weights and optimizer state do not change.
TEST(PlanCosts, Bf16GradientsHalveTheBufferAndTheReduction) {
  const schemas::Plan fp32_gradients = zero1_plan(TrainingFramework::megatron_lm);
  schemas::Plan bf16_gradients = fp32_gradients;
  bf16_gradients.gradient_dtype = schemas::Dtype::bf16;
  const PlanCosts wide = plan_costs(fp32_gradients);
  const PlanCosts narrow = plan_costs(bf16_gradients);
  EXPECT_DOUBLE_EQ(narrow.rank_states[0].gradients_bytes, wide.rank_states[0].gradients_bytes / 2);
  EXPECT_EQ(narrow.rank_states[0].weights_bytes, wide.rank_states[0].weights_bytes);
  EXPECT_EQ(narrow.rank_states[0].optimizer_bytes, wide.rank_states[0].optimizer_bytes);
  const GroupSpan dp_span = group_span(
      fp32_gradients.cluster,
      first_group_ranks(fp32_gradients.mesh, {schemas::MeshAxis::dp, schemas::MeshAxis::cp}));
  EXPECT_DOUBLE_EQ(
      narrow.stages[0].gradient_buckets_s[0],
      collective_time_s(fp32_gradients.cluster, dp_span, Collective::reduce_scatter, 40e6 * 2));
}

// fp8 casts each layer linear's weight to fp8 and fp8ᵀ once per step (read 2 bytes, write 1 + 1):
// GPT-2 774M on one H100, 36 layers of 12·1280² + 9·1280 linear weights and biases, HBM at its
// full 3,350 GB/s. The optimizer step is otherwise the same as bf16's (same state bytes).
TEST(PlanCosts, Fp8CastsTheLayerWeightsOncePerStep) {
  const PlanCosts bf16 = plan_costs(one_h100_plan(schemas::Dtype::bf16));
  const PlanCosts fp8 = plan_costs(one_h100_plan(schemas::Dtype::fp8));
  const double linear_weights = 36.0 * (12.0 * 1280 * 1280 + 9.0 * 1280);
  EXPECT_NEAR(fp8.optimizer_step_s[0] - bf16.optimizer_step_s[0], 4.0 * linear_weights / 3350e9,
              1e-12);
}

// The optimizer step moves what the executors' passes move, per parameter: the norm reads the
// gradient, AdamW reads and writes the master and both moments (24 B) and reads the gradient,
// mixed precision writes the 16-bit copy, and the step's start zeroes the gradient: fp32 4 + 24 +
// 4 + 4 = 36 B, bf16 (fp32 gradients, bf16 copy) 4 + 24 + 4 + 2 + 4 = 38 B. GPT-2 774M on one
// H100 at its full 3,350 GB/s.
TEST(PlanCosts, OptimizerStepMovesWhatTheNormAdamWAndZeroingPassesMove) {
  const auto step_of = [](schemas::Dtype precision) {
    const PlanCosts costs = plan_costs(one_h100_plan(precision));
    return std::pair{costs.optimizer_step_s[0], costs.stages[0].parameters};
  };
  const auto [fp32_s, parameters] = step_of(schemas::Dtype::fp32);
  EXPECT_NEAR(fp32_s, 36.0 * parameters / 3350e9, 1e-12);
  EXPECT_NEAR(step_of(schemas::Dtype::bf16).first, 38.0 * parameters / 3350e9, 1e-12);
}

// A ZeRO-0 gradient bucket is all-reduced non-blocking (issued during the backward, waited for
// before the step): a tier that timed that form at half its blocking all-reduce's bandwidth
// makes every bucket take twice as long. GPT-2 774M, dp 8 on one H100 node, no latency.
TEST(PlanCosts, GradientBucketsArePricedAsTheNonBlockingAllReduceTheyAre) {
  schemas::PlanKnobs knobs;
  knobs.mesh = {.tp = 1, .cp = 1, .dp = 8, .pp = 1};
  knobs.seq_length = 1024;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 64;
  knobs.zero_stage = 0;
  schemas::Plan plan = schemas::build_plan(schemas::model_preset("gpt2-774m"),
                                           schemas::cluster_preset("dgx-h100:1"), knobs, "test");
  schemas::NetworkTier& node = plan.cluster.network_tiers[0];
  node.latency_us = 0;
  node.protocols.clear();
  node.efficiency_by_collective = {{schemas::TierCollective::all_reduce, {{1.0, 1.0}}}};
  const std::vector<double> blocking = plan_costs(plan).stages[0].gradient_buckets_s;
  node.efficiency_by_collective[schemas::TierCollective::all_reduce_non_blocking] = {{1.0, 0.5}};
  const std::vector<double> non_blocking = plan_costs(plan).stages[0].gradient_buckets_s;
  ASSERT_GT(blocking.size(), 1u);
  ASSERT_EQ(non_blocking.size(), blocking.size());
  for (std::size_t i = 0; i < blocking.size(); ++i) {
    EXPECT_NEAR(non_blocking[i], 2 * blocking[i], 1e-12) << "bucket " << i;
  }
}

// ZeRO-3 as PyTorch FSDP runs it without pipelining (torchtitan): GPT-2 774M on 2 H100 nodes,
// dp 16. Each layer's 12·1280² + 9·1280 + 4·1280 parameters are gathered in bf16 during the
// previous layer's forward and again during the backward, where the layer's fp32 gradients are
// reduce-scattered too; what shows is what outlasts the compute plus the compute's slowdown
// (σ = 0.1) while they overlap. No stage-level gather or gradient bucket is left, and two layers'
// (or the embedding's) gathered weights are held instead of the whole model.
TEST(PlanCosts, Zero3LayerByLayerOverlapsEachGatherWithItsNeighbour) {
  const auto fsdp_plan = [](TrainingFramework framework) {
    schemas::PlanKnobs knobs;
    knobs.mesh = {.tp = 1, .cp = 1, .dp = 16, .pp = 1};
    knobs.seq_length = 1024;
    knobs.micro_batch_size = 1;
    knobs.global_batch_size = 32;
    knobs.zero_stage = 3;
    knobs.precision = schemas::Dtype::bf16;
    knobs.framework = framework;
    return schemas::build_plan(schemas::model_preset("gpt2-774m"),
                               schemas::cluster_preset("dgx-h100:2"), knobs, "test");
  };
  const schemas::Plan torchtitan = fsdp_plan(TrainingFramework::torchtitan);
  const LayerContext context = layer_context(torchtitan);
  ASSERT_TRUE(context.zero3_layer_gathers);
  EXPECT_FALSE(layer_context(fsdp_plan(TrainingFramework::strata)).zero3_layer_gathers);
  const PassCosts layer = transformer_layer_costs(context, schemas::RecomputeGranularity::none);
  const double parameters = 12.0 * 1280 * 1280 + 13.0 * 1280;
  const GroupSpan dp_span =
      group_span(torchtitan.cluster, first_group_ranks(torchtitan.mesh, {schemas::MeshAxis::dp}));
  const double gather =
      collective_time_s(torchtitan.cluster, dp_span, Collective::all_gather, 2 * parameters);
  const double scatter =
      collective_time_s(torchtitan.cluster, dp_span, Collective::reduce_scatter, 4 * parameters);
  const auto beside = [](double comm, double compute) {
    return std::max(0.0, comm - compute) + 0.1 * std::min(comm, compute);
  };
  EXPECT_DOUBLE_EQ(layer.forward.dp_comm_s, beside(gather, layer.forward.compute_s));
  EXPECT_DOUBLE_EQ(
      layer.backward_input.dp_comm_s,
      beside(gather + scatter, layer.backward_input.compute_s + layer.backward_weight.compute_s));
  // At one 1,024-token micro-batch the inter-node gathers outlast the layer's forward.
  EXPECT_GT(gather, layer.forward.compute_s);

  const PlanCosts layer_wise = plan_costs(torchtitan);
  const PlanCosts stage_wise = plan_costs(fsdp_plan(TrainingFramework::strata));
  EXPECT_TRUE(layer_wise.stages[0].gradient_buckets_s.empty());
  EXPECT_FALSE(stage_wise.stages[0].gradient_buckets_s.empty());
  EXPECT_EQ(layer_wise.stages[0].unshard_s, 0);
  EXPECT_GT(stage_wise.stages[0].unshard_s, 0);
  EXPECT_DOUBLE_EQ(layer_wise.stages[0].unshard_bytes, 2 * 50257.0 * 1280 * 2);
  EXPECT_GT(stage_wise.stages[0].unshard_bytes, 5 * layer_wise.stages[0].unshard_bytes);
}

// A CPU job of MPI ranks whose profile measured Open MPI's own buffers: its non-blocking
// all-reduce holds a copy of its whole message, the blocking one half, reduce-scatter all of it.
schemas::Plan cpu_plan(schemas::Mesh mesh, std::int64_t zero_stage, bool measured) {
  schemas::ClusterConfig cluster =
      schemas::cluster_preset("cpu-local:" + std::to_string(mesh.tp * mesh.cp * mesh.dp * mesh.pp));
  if (measured) {
    using schemas::CommunicatorOperation;
    cluster.communicator_temporary_bytes_per_byte = {
        {CommunicatorOperation::all_reduce, 0.5},
        {CommunicatorOperation::all_reduce_non_blocking, 1.0},
        {CommunicatorOperation::reduce_scatter, 1.0},
        {CommunicatorOperation::all_gather, 0.0},
        {CommunicatorOperation::send_receive, 0.0}};
  }
  schemas::PlanKnobs knobs;
  knobs.mesh = mesh;
  knobs.seq_length = 256;
  knobs.micro_batch_size = 4;
  knobs.global_batch_size = 16;
  knobs.zero_stage = zero_stage;
  knobs.precision = schemas::Dtype::fp32;
  return schemas::build_plan(schemas::model_preset("gpt2-124m"), cluster, knobs, "test");
}

// Strata's executor groups whole parameter units (the embedding, each layer, the head) into the
// plan's buckets, walking back from the head: GPT-2 124M at 15M parameters a bucket is the head
// with three 7.1M-parameter layers (two are 14.2M), three more layers three times, and the
// embedding (39.4M) on its own — 5 buckets; under ZeRO-3 every unit is one — 14. The simulator
// prices exactly these (the executor's count is checked against it in parallel_cli_test).
TEST(PlanCosts, StrataBucketsHoldWholeLayersAsItsExecutorFormsThem) {
  for (const auto& [zero_stage, expected] : {std::pair{0, 5u}, std::pair{3, 14u}}) {
    schemas::Plan plan = cpu_plan({.tp = 1, .cp = 1, .dp = 2, .pp = 1}, zero_stage, false);
    plan.gradient_bucket_elements = 15'000'000;
    EXPECT_EQ(plan_costs(plan).stages[0].gradient_buckets_s.size(), expected)
        << "ZeRO-" << zero_stage;
  }
  // Megatron-LM fills buckets parameter by parameter: the 124.4M parameters in 9 buckets.
  schemas::Plan megatron = cpu_plan({.tp = 1, .cp = 1, .dp = 2, .pp = 1}, 0, false);
  megatron.framework = TrainingFramework::megatron_lm;
  megatron.gradient_bucket_elements = 15'000'000;
  EXPECT_EQ(plan_costs(megatron).stages[0].gradient_buckets_s.size(), 9u);
}

// ZeRO-0's bucket all-reduces are waited for only before the step: every bucket's copy is held at
// once, 124.4M fp32 gradients' worth. ZeRO-1 reduce-scatters one bucket at a time (its largest). A
// pipeline's first and last ranks all-reduce the tied word embedding's gradient (50257·768 fp32),
// blocking: half of it. NCCL's clusters measure none of it.
TEST(PlanCosts, CommunicatorTemporariesFollowTheMeasuredRatios) {
  const costmodels::ParameterBreakdown counts =
      costmodels::count_parameters(schemas::model_preset("gpt2-124m"));
  const PlanCosts dp = plan_costs(cpu_plan({.tp = 1, .cp = 1, .dp = 2, .pp = 1}, 0, true));
  EXPECT_DOUBLE_EQ(dp.rank_states[0].communicator_bytes, dp.stages[0].parameters * 4);
  EXPECT_NEAR(dp.rank_states[0].communicator_bytes, 124.4e6 * 4, 0.1e6 * 4);

  // Strata's executor closes a bucket at a whole layer: walking back from the head, six of
  // GPT-2's 7.1M-parameter layers (with the final norm) are the first to reach 40M.
  const PlanCosts zero1 = plan_costs(cpu_plan({.tp = 1, .cp = 1, .dp = 2, .pp = 1}, 1, true));
  EXPECT_DOUBLE_EQ(zero1.rank_states[0].communicator_bytes,
                   static_cast<double>(6 * counts.per_dense_layer() + counts.final_norm) * 4);

  const PlanCosts pipeline = plan_costs(cpu_plan({.tp = 1, .cp = 1, .dp = 1, .pp = 2}, 0, true));
  for (const RankStateMemory& rank : pipeline.rank_states) {
    EXPECT_DOUBLE_EQ(rank.communicator_bytes, 0.5 * 50257 * 768 * 4);
  }

  for (const bool measured : {true, false}) {
    const PlanCosts one_rank =
        plan_costs(cpu_plan({.tp = 1, .cp = 1, .dp = 1, .pp = 1}, 0, measured));
    EXPECT_EQ(one_rank.rank_states[0].communicator_bytes, 0);
  }
  const PlanCosts unmeasured = plan_costs(cpu_plan({.tp = 1, .cp = 1, .dp = 2, .pp = 1}, 0, false));
  EXPECT_EQ(unmeasured.rank_states[0].communicator_bytes, 0);
  // Held on top of the model's states: part of what the simulator's peak adds up.
  EXPECT_DOUBLE_EQ(dp.rank_states[0].total(),
                   dp.rank_states[0].weights_bytes + dp.rank_states[0].gradients_bytes +
                       dp.rank_states[0].optimizer_bytes + dp.rank_states[0].communicator_bytes);
}

// Hybrid sharding: ZeRO over each node's 8 dp ranks of dp 32 (tp 1 on 4 nodes of 8). The (one)
// bucket is reduce-scattered over the node, then its reduced eighth all-reduced across the 4
// replicas; ZeRO-3 gathers a stage over the node only; the state divides by 8, not 32.
TEST(PlanCosts, HybridShardingReducesInTheShardGroupAndAllReducesShardsAcrossReplicas) {
  schemas::PlanKnobs knobs;
  knobs.mesh = {.tp = 1, .cp = 1, .dp = 32, .pp = 1};
  knobs.seq_length = 1024;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 64;
  knobs.zero_stage = 1;
  knobs.precision = schemas::Dtype::bf16;
  knobs.gradient_bucket_elements = std::int64_t{1} << 40;  // one bucket for the whole model
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100:4");
  const schemas::ModelConfig model = schemas::model_preset("gpt2-774m");
  const PlanCosts full = plan_costs(schemas::build_plan(model, cluster, knobs, "test"));
  knobs.mesh.dp_shard = 8;
  const schemas::Plan hybrid_plan = schemas::build_plan(model, cluster, knobs, "test");
  const PlanCosts hybrid = plan_costs(hybrid_plan);
  EXPECT_NEAR(hybrid.rank_states[0].optimizer_bytes, 4 * full.rank_states[0].optimizer_bytes,
              1e-9 * hybrid.rank_states[0].optimizer_bytes);
  EXPECT_EQ(hybrid.rank_states[0].weights_bytes, full.rank_states[0].weights_bytes);

  const double gradient_bytes = gradient_bytes_per_parameter(hybrid_plan);
  const double parameters = hybrid.stages[0].parameters;
  const GroupSpan node = group_span(cluster, schemas::zero_shard_group_of(hybrid_plan.mesh, 0));
  const GroupSpan replicas =
      group_span(cluster, schemas::zero_replica_group_of(hybrid_plan.mesh, 0));
  const GroupSpan all = group_span(
      cluster, first_group_ranks(hybrid_plan.mesh, {schemas::MeshAxis::dp, schemas::MeshAxis::cp}));
  ASSERT_EQ(node.size, 8);
  ASSERT_EQ(node.outermost_tier(), 0);  // NVLink
  ASSERT_EQ(replicas.size, 4);
  ASSERT_EQ(hybrid.stages[0].gradient_buckets_s.size(), 1u);
  const double expected =
      collective_time_s(cluster, node, Collective::reduce_scatter, parameters * gradient_bytes) +
      collective_time_s(cluster, replicas, Collective::all_reduce, parameters / 8 * gradient_bytes);
  EXPECT_NEAR(hybrid.stages[0].gradient_buckets_s[0], expected, 1e-12 + 1e-9 * expected);
  EXPECT_NEAR(
      full.stages[0].gradient_buckets_s[0],
      collective_time_s(cluster, all, Collective::reduce_scatter, parameters * gradient_bytes),
      1e-9 * full.stages[0].gradient_buckets_s[0]);

  knobs.zero_stage = 3;
  const PlanCosts hybrid3 = plan_costs(schemas::build_plan(model, cluster, knobs, "test"));
  EXPECT_NEAR(
      hybrid3.stages[0].unshard_s,
      collective_time_s(cluster, node, Collective::all_gather, hybrid3.stages[0].unshard_bytes),
      1e-9 * hybrid3.stages[0].unshard_s);
}

}  // namespace
}  // namespace strata::costmodels
