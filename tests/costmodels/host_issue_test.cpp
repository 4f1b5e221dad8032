// The host-issue bound of eager stacks (layer_costs.h, "host issue"): kernel counts by hand, and a
// pass that lasts the longer of its device time and its kernels' issue.
#include <gtest/gtest.h>

#include "strata/costmodels/framework_behaviour.h"
#include "strata/costmodels/layer_costs.h"
#include "strata/costmodels/moe_block_costs.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using schemas::TrainingFramework;

constexpr double kIssueUs = 20;

// GPT-2 350M (hidden 1,024, learned positions, GELU, dropout 0.1) on one A100 node whose host
// issues an eager kernel in 20 µs.
schemas::Plan small_plan(TrainingFramework framework, std::int64_t tp, bool sequence_parallel,
                         std::int64_t micro_batch,
                         schemas::AttentionKernel attention = schemas::AttentionKernel::flash) {
  schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-a100-80gb:1");
  cluster.gpu.eager_issue_us_per_kernel = kIssueUs;
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = tp;
  knobs.mesh.dp = 8 / tp;
  knobs.seq_length = 1024;
  knobs.micro_batch_size = micro_batch;
  knobs.global_batch_size = micro_batch * (8 / tp);
  knobs.sequence_parallel = sequence_parallel;
  knobs.framework = framework;
  knobs.attention = attention;
  return schemas::build_plan(schemas::model_preset("gpt2-350m"), cluster, knobs, "test");
}

PassCosts layer_of(const schemas::Plan& plan,
                   schemas::RecomputeGranularity recompute = schemas::RecomputeGranularity::none) {
  return transformer_layer_costs(layer_context(plan), recompute);
}

// A GPT layer without tp, flash attention:
//   forward   4 GEMMs (qkv, projection, fc1, fc2) + 1 attention + 2 norms + 2 residual adds
//             + 1 GELU = 10
//   backward  4 input-gradient GEMMs + 2 attention (preprocess, gradients) + 8 for the norms and
//             adds (two each) + 2 for GELU = 16; weight gradients 4 GEMMs.
TEST(HostIssue, KernelsOfAGptLayerCountedByHand) {
  const PassCosts costs = layer_of(small_plan(TrainingFramework::megatron_lm, 1, false, 1));
  EXPECT_EQ(costs.forward.kernels, 10);
  EXPECT_EQ(costs.backward_input.kernels, 16);
  EXPECT_EQ(costs.backward_weight.kernels, 4);
  EXPECT_EQ(costs.recompute.kernels, 0);
  // tp 8: an all-reduce after attention and after the MLP, each way; with sequence parallelism
  // an all-gather before each block and a reduce-scatter after it instead.
  const PassCosts tp8 = layer_of(small_plan(TrainingFramework::megatron_lm, 8, false, 1));
  EXPECT_EQ(tp8.forward.kernels, 12);
  EXPECT_EQ(tp8.backward_input.kernels, 18);
  const PassCosts sp8 = layer_of(small_plan(TrainingFramework::megatron_lm, 8, true, 1));
  EXPECT_EQ(sp8.forward.kernels, 14);
  EXPECT_EQ(sp8.backward_input.kernels, 20);
  // Unfused attention (dropout 0.1): QKᵀ, softmax, dropout, PV forward (4 for flash's 1) and
  // 6 backward (for flash's 2).
  const PassCosts unfused = layer_of(
      small_plan(TrainingFramework::megatron_lm, 1, false, 1, schemas::AttentionKernel::unfused));
  EXPECT_EQ(unfused.forward.kernels, 13);
  EXPECT_EQ(unfused.backward_input.kernels, 20);
  // Full recomputation issues the forward again.
  const PassCosts full = layer_of(small_plan(TrainingFramework::megatron_lm, 1, false, 1),
                                  schemas::RecomputeGranularity::full);
  EXPECT_EQ(full.recompute.kernels, 10);
}

TEST(HostIssue, EagerStacksPayTheClustersIssueTimePerKernel) {
  const PassCosts eager = layer_of(small_plan(TrainingFramework::megatron_deepspeed, 8, false, 1));
  EXPECT_DOUBLE_EQ(eager.forward.host_issue_s, 12 * kIssueUs * 1e-6);
  EXPECT_DOUBLE_EQ(eager.backward_input.host_issue_s, 18 * kIssueUs * 1e-6);
  // Its weight gradients: the four GEMMs and the four biases' sums (unfused_elementwise.h).
  EXPECT_DOUBLE_EQ(eager.backward_weight.host_issue_s, 8 * kIssueUs * 1e-6);
  // Strata's executor issues from C++: the same kernels, no host bound.
  const PassCosts native = layer_of(small_plan(TrainingFramework::strata, 8, false, 1));
  EXPECT_EQ(native.forward.kernels, 12);
  EXPECT_EQ(native.forward.host_issue_s, 0);
  EXPECT_DOUBLE_EQ(native.forward.total_s(), native.forward.device_s());
  // A cluster that does not say how fast its host issues: no bound either.
  schemas::Plan silent = small_plan(TrainingFramework::megatron_lm, 8, false, 1);
  silent.cluster.gpu.eager_issue_us_per_kernel.reset();
  EXPECT_EQ(layer_of(silent).forward.host_issue_s, 0);
}

// At tp 8 and one sequence of 1,024 tokens a layer's twelve forward kernels run in well under
// 12 × 20 µs on an A100: the pass waits for the host. At 16 sequences the GEMMs outlast the issue.
TEST(HostIssue, APassLastsTheLongerOfItsDeviceTimeAndItsIssue) {
  const PassCosts small = layer_of(small_plan(TrainingFramework::megatron_lm, 8, false, 1));
  ASSERT_LT(small.forward.device_s(), small.forward.host_issue_s);
  EXPECT_DOUBLE_EQ(small.forward.total_s(), small.forward.host_issue_s);
  EXPECT_DOUBLE_EQ(small.forward.host_wait_s(),
                   small.forward.host_issue_s - small.forward.device_s());
  const PassCosts large = layer_of(small_plan(TrainingFramework::megatron_lm, 1, false, 16));
  ASSERT_GT(large.forward.device_s(), large.forward.host_issue_s);
  EXPECT_DOUBLE_EQ(large.forward.total_s(), large.forward.device_s());
  EXPECT_EQ(large.forward.host_wait_s(), 0);
}

// Summed over a stage the host runs ahead across layers: the sum's bound is the longer of the
// summed device times and the summed issue times, not the sum of each layer's longer.
TEST(HostIssue, SumsKeepDeviceAndHostApart) {
  PassTime device_bound{.compute_s = 3e-3, .kernels = 10, .host_issue_s = 1e-3};
  const PassTime host_bound{.compute_s = 1e-3, .kernels = 10, .host_issue_s = 2e-3};
  device_bound += host_bound;
  EXPECT_DOUBLE_EQ(device_bound.kernels, 20);
  EXPECT_DOUBLE_EQ(device_bound.total_s(), 4e-3);  // not 3e-3 + 2e-3
  EXPECT_DOUBLE_EQ(host_bound.scaled(3).host_issue_s, 6e-3);
  EXPECT_DOUBLE_EQ(host_bound.scaled(3).kernels, 30);
}

// CUDA graphs (a plan's cuda_graph_scope) replay a block's kernels for one launch. The GPT layer at
// tp 8 with sequence parallelism issues 14 kernels forward, 20 backward and 4 weight-gradient
// GEMMs. Its attention block holds, forward, 2 GEMMs (qkv, projection), the flash kernel, its norm
// and residual add and the all-gather and reduce-scatter: 7; backward 2 + 2 + 4 + 2 = 10; weight
// gradients 2. The MLP block the same counts with the GELU for the attention kernel(s) — forward
// 7, backward 2 + 2 + 4 + 2 = 10, weight 2. A whole-iteration graph leaves nothing to issue.
TEST(HostIssue, CudaGraphsReplayTheirBlocksForOneLaunch) {
  schemas::Plan plan = small_plan(TrainingFramework::megatron_lm, 8, true, 1);
  const double issue_s = kIssueUs * 1e-6;
  plan.cuda_graph_scope = {schemas::CudaGraphScope::attn};
  const PassCosts attention = layer_of(plan);
  EXPECT_EQ(attention.forward.kernels, 14);  // still run, on the device
  EXPECT_EQ(attention.forward.graphed_kernels, 7);
  EXPECT_DOUBLE_EQ(attention.forward.host_issue_s, (14 - 7 + 1) * issue_s);
  EXPECT_DOUBLE_EQ(attention.backward_input.host_issue_s, (20 - 10 + 1) * issue_s);
  EXPECT_DOUBLE_EQ(attention.backward_weight.host_issue_s, (4 - 2 + 1) * issue_s);
  plan.cuda_graph_scope = {schemas::CudaGraphScope::attn, schemas::CudaGraphScope::mlp};
  const PassCosts both = layer_of(plan);
  EXPECT_DOUBLE_EQ(both.forward.host_issue_s, 2 * issue_s);
  EXPECT_DOUBLE_EQ(both.backward_input.host_issue_s, 2 * issue_s);
  EXPECT_DOUBLE_EQ(both.backward_weight.host_issue_s, 2 * issue_s);
  EXPECT_DOUBLE_EQ(both.forward.device_s(), attention.forward.device_s());
  plan.cuda_graph_scope = {schemas::CudaGraphScope::full_iteration};
  const PassCosts whole = layer_of(plan);
  EXPECT_EQ(whole.forward.host_issue_s, 0);
  EXPECT_EQ(whole.backward_input.host_issue_s, 0);
  EXPECT_EQ(embedding_costs(layer_context(plan)).forward.host_issue_s, 0);
  EXPECT_EQ(lm_head_costs(layer_context(plan)).forward.host_issue_s, 0);
}

// A dropless MoE layer of Qwen3-30B-A3B on 8 H100s (ep 8, 16 local experts) issues in its routed
// part, forward: the router GEMM, 32 expert GEMMs, scores, top-k, balancing, permute, un-permute,
// the two chunk sorts, the SwiGLU, two all-to-alls and the dispatcher's nine preprocessing kernels
// (counts, split sizes, the counts' all-gather, three copies to the host) = 52. Graphs of the
// router (its GEMM and three kernels; backward 1 + 6, weight 1) and of the preprocessing (9,
// forward only) leave 52 − 13 + 2 of them to the host's issue in that part.
TEST(HostIssue, RouterAndDispatchPreprocessingGraphsOfAMoeLayer) {
  schemas::PlanKnobs knobs;
  knobs.mesh.dp = 8;
  knobs.mesh.ep = 8;
  knobs.seq_length = 4096;
  knobs.global_batch_size = 8;
  knobs.framework = TrainingFramework::megatron_lm;
  schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100:1");
  cluster.gpu.eager_issue_us_per_kernel = kIssueUs;
  schemas::Plan plan =
      schemas::build_plan(schemas::model_preset("qwen3-30b-a3b"), cluster, knobs, "test");
  const auto moe_layer = [](const schemas::Plan& plan) {
    return transformer_layer_costs(layer_context(plan), schemas::RecomputeGranularity::none,
                                   LayerKind::moe);
  };
  const PassCosts eager = moe_layer(plan);
  const MoeBlockCosts block = moe_block_costs(layer_context(plan));
  EXPECT_EQ(block.forward.kernels, 52);
  EXPECT_EQ(block.preprocess_kernels, 9);
  plan.cuda_graph_scope = {schemas::CudaGraphScope::moe_router,
                           schemas::CudaGraphScope::moe_preprocess};
  const PassCosts graphed = moe_layer(plan);
  const double issue_s = kIssueUs * 1e-6;
  EXPECT_NEAR(eager.forward.host_issue_s - graphed.forward.host_issue_s, (13 - 2) * issue_s, 1e-12);
  EXPECT_NEAR(eager.backward_input.host_issue_s - graphed.backward_input.host_issue_s,
              (7 - 1) * issue_s, 1e-12);
  EXPECT_NEAR(eager.backward_weight.host_issue_s, graphed.backward_weight.host_issue_s, 1e-12);
  // Token drop (a capacity factor) has static split sizes: one count, nothing copied to the host.
  plan.model.moe->capacity_factor = 1.0;
  EXPECT_EQ(moe_block_costs(layer_context(plan)).preprocess_kernels, 1);
}

TEST(HostIssue, EveryPyTorchStackIssuesEagerlyAndStrataDoesNot) {
  for (const auto& [framework, name] : schemas::kTrainingFrameworkNames) {
    EXPECT_EQ(framework_behaviour(framework).issues_kernels_eagerly,
              framework != TrainingFramework::strata)
        << name;
  }
}

}  // namespace
}  // namespace strata::costmodels
