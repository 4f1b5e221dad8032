// Selective recomputation by module (a plan's recompute.modules, Megatron-Core's
// --recompute-modules): what each module stops keeping and what running its forward again costs,
// computed by hand from the layer's shapes.
#include <gtest/gtest.h>

#include <vector>

#include "moe_test_plans.h"
#include "strata/costmodels/activation_memory.h"
#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/gemm_passes.h"
#include "strata/costmodels/kernel_time.h"
#include "strata/costmodels/layer_costs.h"
#include "strata/costmodels/moe_block_costs.h"

namespace strata::costmodels {
namespace {

using schemas::RecomputeGranularity;
using schemas::RecomputeModule;

schemas::Plan selective(schemas::Plan plan, std::vector<RecomputeModule> modules) {
  plan.recompute.granularity = RecomputeGranularity::selective;
  plan.recompute.modules = std::move(modules);
  return plan;
}

// GPT-OSS's recipe recomputes the pre-MLP norm and the experts' activation. The layer stops
// keeping the norm's output the router reads (4,096 × 2,048 × 2 bytes) and fc2's input of every
// routed copy (32,768 × 768 × 2 bytes), and still keeps the attention's (core_attn is not named);
// before its backward it runs the norm again (read and write 4,096 × 2,048 × 2 bytes) and the
// SwiGLU (read 2 × 768, write 768 per copy, a sigmoid per output).
TEST(RecomputeModules, NormAndExpertActivationOfAMoeLayer) {
  // Qwen3-30B-A3B on 8 H100s, ep 8, bf16, one 4,096-token sequence per micro-batch: each rank's
  // 16 experts take the 32,768 routed copies.
  const schemas::Plan plan = strata::testing::qwen3_moe_plan(8, 1, 8);
  const LayerContext kept = layer_context(plan);
  // A context points into its plan: each plan outlives its context.
  const schemas::Plan gpt_oss_recipe =
      selective(plan, {RecomputeModule::layernorm, RecomputeModule::moe_act});
  const LayerContext recomputed = layer_context(gpt_oss_recipe);
  const LayerActivationBytes all =
      layer_activation_bytes(kept, RecomputeGranularity::none, LayerKind::moe);
  const LayerActivationBytes some =
      layer_activation_bytes(recomputed, RecomputeGranularity::selective, LayerKind::moe);
  const double dropped = 2.0 * 4096 * 2048 + 2.0 * 32768 * 768;
  EXPECT_DOUBLE_EQ(all.stored - some.stored, dropped);
  EXPECT_DOUBLE_EQ(some.working - all.working, dropped);

  const PassCosts costs =
      transformer_layer_costs(recomputed, RecomputeGranularity::selective, LayerKind::moe);
  const schemas::GpuProfile& gpu = plan.cluster.gpu;
  const double norm_s = memory_bound_time_s(gpu, 2 * 2.0 * 4096 * 2048);
  const double swiglu_s = elementwise_time_s(gpu, 3 * 2.0 * 32768 * 768, 32768.0 * 768, 1);
  EXPECT_DOUBLE_EQ(costs.recompute.compute_s, norm_s + swiglu_s);
  EXPECT_DOUBLE_EQ(costs.recompute.kernels, 2);
  EXPECT_DOUBLE_EQ(costs.recompute_flops, 0);
  // The default module, the attention core, is what "selective" alone recomputes.
  const PassCosts attention_only =
      transformer_layer_costs(kept, RecomputeGranularity::selective, LayerKind::moe);
  EXPECT_GT(attention_only.recompute_flops, 0);
  const schemas::Plan named_core = selective(plan, {RecomputeModule::core_attn});
  EXPECT_DOUBLE_EQ(transformer_layer_costs(layer_context(named_core),
                                           RecomputeGranularity::selective, LayerKind::moe)
                       .recompute.compute_s,
                   attention_only.recompute.compute_s);
}

// DeepSeek-V3's H100 recipe recomputes the latent up projections and the dense layers' MLP. On
// tp 2 with sequence parallelism (64 heads a rank, queries and keys 192 wide, values 128, the
// dense MLP 18,432 / 2 wide, 4,096 tokens, bf16), a dense layer stops keeping the queries, keys
// and values (2·T·(128 × 192 + 64 × 128) bytes) and the MLP's fc1 input (its sequence-parallel
// shard, 2·T/2·7168), fc1's output (2·T·2·9216) and fc2's input (2·T·9216); it runs again the up
// projections (T × 1536 → 64 × 192 and T × 512 → 64 × 256), fc1 and fc2 with the SwiGLU, and the
// MLP's all-gather and reduce-scatter.
TEST(RecomputeModules, LatentUpProjectionsAndTheDenseMlp) {
  const schemas::Plan plan = strata::testing::deepseek_v3_tp2_plan();
  const LayerContext kept = layer_context(plan);
  const schemas::Plan h100_recipe =
      selective(plan, {RecomputeModule::mla_up_proj, RecomputeModule::mlp});
  const LayerContext recomputed = layer_context(h100_recipe);
  const double t = 4096;
  const double qkv = 2 * t * (128 * 192 + 64 * 128);
  const double mlp = 2 * (t / 2) * 7168 + 2 * t * 2 * 9216 + 2 * t * 9216;
  const LayerActivationBytes all = layer_activation_bytes(kept, RecomputeGranularity::none);
  const LayerActivationBytes some =
      layer_activation_bytes(recomputed, RecomputeGranularity::selective);
  EXPECT_DOUBLE_EQ(all.stored - some.stored, qkv + mlp);

  const PassCosts costs = transformer_layer_costs(recomputed, RecomputeGranularity::selective);
  const GemmPassTimes up =
      gemm_pass_times(kept, plan.precision, {{t, 64 * 192, 1536}, {t, 64 * 256, 512}});
  const GemmPassTimes fcs =
      gemm_pass_times(kept, plan.precision, {{t, 2 * 9216, 7168}, {t, 7168, 9216}});
  const schemas::GpuProfile& gpu = plan.cluster.gpu;
  const double swiglu_s = elementwise_time_s(gpu, 3 * 2 * t * 9216, t * 9216, 1);
  EXPECT_NEAR(costs.recompute.compute_s, up.forward_s + fcs.forward_s + swiglu_s, 1e-12);
  const double bytes = 2 * t * 7168;
  const GroupSpan& tp = kept.tp_span;
  EXPECT_DOUBLE_EQ(costs.recompute.tp_comm_s,
                   collective_time_s(plan.cluster, tp, Collective::all_gather, bytes) +
                       collective_time_s(plan.cluster, tp, Collective::reduce_scatter, bytes));
  EXPECT_DOUBLE_EQ(costs.recompute_flops, up.forward_flops + fcs.forward_flops);
  // The up projections, fc1, the SwiGLU, fc2 and the all-gather and reduce-scatter.
  EXPECT_DOUBLE_EQ(costs.recompute.kernels, 7);
  // A MoE layer has no dense MLP: only its up projections run again.
  const PassCosts moe =
      transformer_layer_costs(recomputed, RecomputeGranularity::selective, LayerKind::moe);
  EXPECT_NEAR(moe.recompute.compute_s, up.forward_s, 1e-12);
}

}  // namespace
}  // namespace strata::costmodels
