#include "strata/costmodels/moe_block_costs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "moe_test_plans.h"
#include "strata/costmodels/activation_memory.h"
#include "strata/costmodels/attention_time.h"
#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/model_flops.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/costmodels/plan_costs.h"
#include "strata/schemas/mesh_ranks.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using schemas::RecomputeGranularity;

using strata::testing::deepseek_v3_tp2_plan;
using strata::testing::qwen3_moe_plan;

// Each rank routes its 4,096 tokens to 8 experts: 32,768 copies; with ep 8 it holds 16 experts,
// which receive as many copies from the ep group as it sends. With etp 2 the etp pair gathers
// its copies (65,536) for experts half as wide.
TEST(MoeBlockCosts, TokenCountsFollowTopKAndTheExpertMesh) {
  const schemas::Plan plan = qwen3_moe_plan(8, 1, 8);
  const MoeTokenCounts counts = moe_token_counts(layer_context(plan));
  EXPECT_DOUBLE_EQ(counts.block_tokens, 4096);
  EXPECT_DOUBLE_EQ(counts.routed, 32768);
  EXPECT_DOUBLE_EQ(counts.computed, 32768);
  EXPECT_DOUBLE_EQ(counts.local_experts, 16);
  EXPECT_DOUBLE_EQ(counts.expert_width, 768);
  const MoeTokenCounts with_etp = moe_token_counts(layer_context(qwen3_moe_plan(8, 1, 4, 2)));
  EXPECT_DOUBLE_EQ(with_etp.computed, 65536);
  EXPECT_DOUBLE_EQ(with_etp.local_experts, 32);
  EXPECT_DOUBLE_EQ(with_etp.expert_width, 384);
  // Sequence parallelism over tp 2 leaves each rank half the tokens to route.
  EXPECT_DOUBLE_EQ(moe_token_counts(layer_context(qwen3_moe_plan(8, 2, 4))).routed, 16384);
}

// The busiest expert takes `imbalance` times the mean, capped by the capacity factor.
TEST(MoeBlockCosts, ImbalanceIsCappedByTheCapacityFactor) {
  schemas::Plan plan = qwen3_moe_plan(8, 1, 8);
  plan.expert_load_imbalance = 1.5;
  EXPECT_DOUBLE_EQ(moe_token_counts(layer_context(plan)).computed, 1.5 * 32768);
  plan.model.moe->capacity_factor = 1.25;
  EXPECT_DOUBLE_EQ(moe_token_counts(layer_context(plan)).computed, 1.25 * 32768);
  const double balanced = moe_block_costs(layer_context(qwen3_moe_plan(8, 1, 8))).forward.compute_s;
  EXPECT_GT(moe_block_costs(layer_context(plan)).forward.compute_s, balanced);
}

// A MoE layer's forward FLOPs on one rank (tp 1, ep 8): attention QKV 2·T·h·(q + 2kv) =
// 2 × 4096 × 2048 × (4096 + 1024) = 85,899,345,920; output 2·T·q·h = 68,719,476,736; the router
// 2·T·h·E = 2,147,483,648; the experts' copies 2·(T·k)·3·h·f_e = 2 × 32768 × 3 × 2048 × 768 =
// 309,237,645,312 (whichever ranks the copies land on, each rank computes as many as it sends);
// and the causal attention core.
TEST(MoeBlockCosts, MoeLayerForwardFlopsByHand) {
  const schemas::Plan plan = qwen3_moe_plan(8, 1, 8);  // the context points into it
  const LayerContext context = layer_context(plan);
  const PassCosts layer =
      transformer_layer_costs(context, RecomputeGranularity::none, LayerKind::moe);
  const double attention_core =
      causal_attention_flops(
          {.batch = 1, .heads = 32, .query_tokens = 4096, .key_tokens = 4096, .head_dim = 128})
          .forward;
  EXPECT_DOUBLE_EQ(layer.forward_flops,
                   85899345920.0 + 68719476736.0 + 2147483648.0 + 309237645312.0 + attention_core);
  // The same matrices per token as the model's FLOP count (which counts the whole s×s products
  // rather than the causal half): 2 × (GEMM parameters a token multiplies with).
  const ParameterBreakdown counts = count_parameters(*context.model);
  const double per_token_matrices =
      static_cast<double>(attention_matrix_parameters(*context.model)) + 2048.0 * 128 +
      8.0 * static_cast<double>(mlp_matrix_parameters(*context.model, 768));
  EXPECT_DOUBLE_EQ(layer.forward_flops - attention_core, 2 * 4096 * per_token_matrices);
  EXPECT_EQ(counts.num_moe_layers, 48);
}

// Dispatch and combine, forward and backward each: two all-to-alls over the ep group of the
// copies' activations (32,768 × 2048 × 2 bytes), on the critical path unless overlapped. Before
// the forward's dispatch, a dropless block all-gathers every rank's 128 per-expert counts (8 bytes
// each) over the ep group.
TEST(MoeBlockCosts, TokenExchangeIsTwoAllToAllsPerPass) {
  const schemas::Plan plan = qwen3_moe_plan(16, 1, 16);
  const LayerContext context = layer_context(plan);
  ASSERT_EQ(context.ep_span.size, 16);
  ASSERT_EQ(context.ep_span.levels.size(), 2u);  // two nodes
  const double all_to_all =
      collective_time_s(plan.cluster, context.ep_span, Collective::all_to_all, 32768.0 * 2048 * 2);
  const double counts =
      collective_time_s(plan.cluster, context.ep_span, Collective::all_gather, 8.0 * 128 * 16);
  const MoeBlockCosts block = moe_block_costs(context);
  EXPECT_DOUBLE_EQ(block.forward.ep_comm_s, 2 * all_to_all + counts);
  EXPECT_DOUBLE_EQ(block.backward_input.ep_comm_s, 2 * all_to_all);
  EXPECT_EQ(block.backward_weight.ep_comm_s, 0);
  const PassCosts exposed =
      transformer_layer_costs(context, RecomputeGranularity::none, LayerKind::moe);
  EXPECT_DOUBLE_EQ(exposed.forward.ep_comm_s, 2 * all_to_all + counts);
  // Overlapped with another micro-batch's compute: what outlasts the forward's compute, plus the
  // compute's slowdown while they share the GPU.
  schemas::Plan overlapped = plan;
  overlapped.ep_comm_overlap = true;
  const PassCosts hidden = transformer_layer_costs(layer_context(overlapped),
                                                   RecomputeGranularity::none, LayerKind::moe);
  const double slowdown = plan.cluster.gpu.compute_slowdown_under_communication;
  EXPECT_DOUBLE_EQ(hidden.forward.ep_comm_s,
                   std::max(0.0, 2 * all_to_all + counts - hidden.forward.compute_s) +
                       slowdown * std::min(2 * all_to_all + counts, hidden.forward.compute_s));
  EXPECT_LT(hidden.forward.ep_comm_s, exposed.forward.ep_comm_s);
  // Inside one node the exchange is cheaper than across two.
  EXPECT_LT(moe_block_costs(layer_context(qwen3_moe_plan(16, 1, 8))).forward.ep_comm_s,
            block.forward.ep_comm_s);
}

// Expert tensor parallelism gathers the ep group's copies over the etp pair before the experts
// and reduce-scatters after them.
TEST(MoeBlockCosts, ExpertTensorParallelismGathersTheCopies) {
  const schemas::Plan plan = qwen3_moe_plan(8, 1, 4, 2);
  const LayerContext context = layer_context(plan);
  ASSERT_EQ(context.etp_span.size, 2);
  const double gathered = 65536.0 * 2048 * 2;
  const double pair_s =
      collective_time_s(*context.cluster, context.etp_span, Collective::all_gather, gathered) +
      collective_time_s(*context.cluster, context.etp_span, Collective::reduce_scatter, gathered);
  const double all_to_all = collective_time_s(*context.cluster, context.ep_span,
                                              Collective::all_to_all, 32768.0 * 2048 * 2);
  const double counts =
      collective_time_s(*context.cluster, context.ep_span, Collective::all_gather, 8.0 * 128 * 4);
  EXPECT_DOUBLE_EQ(moe_block_costs(context).forward.ep_comm_s, 2 * all_to_all + pair_s + counts);
}

// Model states: the dense parameters sharded by ZeRO-1 over dp = 8, the routed experts split
// over ep = 8 (16 of 128 per rank) and their optimizer state over edp = tp·dp/ep = 1.
TEST(MoeBlockCosts, ExpertStateIsShardedOverTheExpertDataParallelGroup) {
  const schemas::Plan plan = qwen3_moe_plan(8, 1, 8);
  const ParameterBreakdown counts = count_parameters(plan.model);
  const PlanCosts costs = plan_costs(plan);
  const double experts = static_cast<double>(counts.routed_experts_per_moe_layer() * 48) / 8;
  const double dense = static_cast<double>(counts.total()) -
                       static_cast<double>(counts.routed_experts_per_moe_layer() * 48);
  EXPECT_NEAR(costs.stages[0].expert_parameters, experts, 1);
  EXPECT_NEAR(costs.stages[0].parameters, dense + experts, 1);
  EXPECT_NEAR(costs.rank_states[0].optimizer_bytes, 12 * dense / 8 + 12 * experts, 64);
  EXPECT_NEAR(costs.rank_states[0].weights_bytes, 2 * (dense + experts), 16);
}

// With no sharding the stages' parameters add up to the model's, dense and MoE layers alike — and
// the MTP module's, on the last stage with its copy of the embedding it shares with the first.
TEST(MoeBlockCosts, StageParametersAddUpToTheModel) {
  const schemas::ModelConfig model = schemas::model_preset("deepseek-v3");
  const ParameterBreakdown counts = count_parameters(model);
  const schemas::Mesh mesh{.tp = 1, .cp = 1, .dp = 1, .pp = 4};
  double total = 0;
  for (const schemas::PipelineStage& stage : schemas::even_pipeline_stages(model.num_layers, 4)) {
    total += stage_parameters(model, counts, mesh, stage).total();
  }
  EXPECT_NEAR(total, static_cast<double>(counts.total() + counts.token_embedding), 1);
  EXPECT_EQ(moe_layers_in(model, 0, 3), 0);  // the first three layers are dense
  EXPECT_EQ(moe_layers_in(model, 0, 61), 58);
  EXPECT_EQ(moe_layers_in(model, 2, 3), 2);
}

// Megatron places the MTP module on the last pipeline stage: its inputs (the shared embedding's
// lookup, two norms, eh_proj), a layer of the last layer's kind (DeepSeek-V3: MoE) and another
// pass through the head cost there and nowhere else, and the stage keeps a copy of the embedding
// that the first stage's is summed with (the all-reduce an untied model had no need of).
TEST(MoeBlockCosts, MultiTokenPredictionIsPricedOnTheLastStage) {
  const schemas::Plan plan =
      deepseek_v3_tp2_plan(/*dp=*/2, /*pp=*/2, /*ep=*/4, /*global_batch_size=*/8);
  schemas::Plan main_model = plan;
  main_model.model.mtp.reset();
  const PlanCosts with = plan_costs(plan);
  const PlanCosts without = plan_costs(main_model);
  const LayerCostSet layers = layer_cost_set(layer_context(plan));
  ASSERT_EQ(with.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(with.stages[0].passes.forward.compute_s,
                   without.stages[0].passes.forward.compute_s);
  EXPECT_DOUBLE_EQ(with.stages[0].parameters, without.stages[0].parameters);
  EXPECT_NEAR(with.stages[1].passes.forward.compute_s - without.stages[1].passes.forward.compute_s,
              layers.mtp_input.forward.compute_s + layers.moe_plain.forward.compute_s +
                  layers.lm_head.forward.compute_s,
              1e-12);
  EXPECT_GT(layers.mtp_input.forward.compute_s, 0);
  const ParameterBreakdown counts = count_parameters(plan.model);
  EXPECT_NEAR(with.stages[1].expert_parameters - without.stages[1].expert_parameters,
              static_cast<double>(counts.routed_experts_per_moe_layer()) / 4, 1);
  EXPECT_GT(with.stages[1].parameters - without.stages[1].parameters,
            static_cast<double>(counts.token_embedding) / 2)
      << "the embedding's copy (split over tp) and the module";
  EXPECT_EQ(without.tied_embedding_grad_s, 0);
  EXPECT_GT(with.tied_embedding_grad_s, 0);
}

// Latent attention on tp 2: the down projections (h → q_lora, h → kv_lora + rope) whole on each
// rank, the up projections and the output split. DeepSeek-V3, 4,096 tokens:
//   q down 2·T·7168·1536, q up 2·T·1536·(64 × 192), kv down 2·T·7168·576,
//   kv up 2·T·512·(64 × 256), output 2·T·(64 × 128)·7168.
TEST(MoeBlockCosts, LatentAttentionGemmsKeepTheDownProjectionsWhole) {
  const schemas::Plan plan = deepseek_v3_tp2_plan();
  const LayerContext context = layer_context(plan);
  const double t = 4096;
  const double gemms = 2 * t * 7168 * 1536 + 2 * t * 1536 * (64 * 192) + 2 * t * 7168 * 576 +
                       2 * t * 512 * (64 * 256) + 2 * t * (64 * 128) * 7168;
  const double dense_mlp = 2 * t * 3 * 7168 * (18432 / 2);
  // Queries and keys 192 wide, values 128: the core at their mean width.
  const double core =
      causal_attention_flops(
          {.batch = 1, .heads = 64, .query_tokens = 4096, .key_tokens = 4096, .head_dim = 160})
          .forward;
  EXPECT_DOUBLE_EQ(transformer_layer_costs(context, RecomputeGranularity::none).forward_flops,
                   gemms + dense_mlp + core);
}

// A MoE layer keeps its routed copies' activations: more than a dense layer of the same model
// whose MLP is as wide as all the experts a token visits.
TEST(MoeBlockCosts, ActivationsGrowWithTheRoutedCopies) {
  const schemas::Plan plan = qwen3_moe_plan(8, 1, 8);
  const LayerContext context = layer_context(plan);
  const LayerActivationBytes moe =
      layer_activation_bytes(context, RecomputeGranularity::none, LayerKind::moe);
  schemas::Plan doubled = qwen3_moe_plan(8, 1, 8);
  doubled.model.moe->experts_per_token = 16;
  const LayerActivationBytes more =
      layer_activation_bytes(layer_context(doubled), RecomputeGranularity::none, LayerKind::moe);
  // Eight more copies of 4,096 tokens: inputs, fc2 output (2h) and the activation's 2·768 input
  // and fc2's 768 input, 2 bytes each.
  EXPECT_DOUBLE_EQ(more.stored - moe.stored, 2.0 * 32768 * (2 * 2048 + 3 * 768));
  EXPECT_DOUBLE_EQ(
      layer_activation_bytes(context, RecomputeGranularity::full, LayerKind::moe).stored,
      2.0 * 4096 * 2048);
}

}  // namespace
}  // namespace strata::costmodels
