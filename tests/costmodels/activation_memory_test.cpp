// Activation bytes per layer against Korthikanti et al. and Megatron's, for quantised recipes and
// for Strata's executor's buffers.
#include "strata/costmodels/activation_memory.h"

#include <gtest/gtest.h>

#include "gpt3_layer_plan.h"
#include "strata/costmodels/layer_costs.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using strata::testing::gpt3_plan;

// Korthikanti et al. 2022, GPT-3 175B (s = 2048, b = 1, h = 12288, a = 96) on t = 8, 16-bit, with
// dropout and unfused attention — bytes per layer:
//   tensor parallel only      s·b·h·(10 + 24/t + 5as/(ht)) = 25,165,824 × (13 + 10)  = 578,813,952
//   + sequence parallelism    s·b·h/t·(34 + 5as/h)        = 3,145,728 × (34 + 80)   = 358,612,992
//   + selective recompute     s·b·h/t·34                                            = 106,954,752
//   full recompute (sp)       2·s·b·h/t                                             =   6,291,456
TEST(ActivationMemory, KorthikantiBytesPerLayer) {
  schemas::Plan plan = gpt3_plan(8, false);
  plan.attention = schemas::AttentionKernel::unfused;
  const LayerContext tp_only = layer_context(plan);
  using schemas::RecomputeGranularity;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(tp_only, RecomputeGranularity::none).stored, 578813952.0);
  schemas::Plan sequence_parallel_plan = gpt3_plan(8, true);  // the context points into it
  sequence_parallel_plan.attention = schemas::AttentionKernel::unfused;
  const LayerContext with_sp = layer_context(sequence_parallel_plan);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(with_sp, RecomputeGranularity::none).stored, 358612992.0);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(with_sp, RecomputeGranularity::selective).stored,
                   106954752.0);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(with_sp, RecomputeGranularity::full).stored, 6291456.0);
  const schemas::Plan flash_plan = gpt3_plan(8, true);
  const LayerContext flash = layer_context(flash_plan);
  // Flash attention keeps the fp32 log-sum-exp (4·b·(a/t)·s = 98,304 bytes) instead of scores.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(flash, RecomputeGranularity::none).stored,
                   106954752.0 + 98304.0);
}

// A quantised recipe keeps each GEMM's input for its weight gradient in the low-precision copy the
// GEMM ran on (Transformer Engine). The same GPT-3 layer with sequence parallelism and flash, in
// units of s·b·h/t = 3,145,728 elements: 16-bit keeps 34 bytes each (attention 2 + 2 + 6 + 2 + 1,
// MLP 2 + 2 + 8 + 8 + 1); fp8 (1 byte) keeps the QKV input at 1, fc1's at 1, fc2's at 4 and adds
// the projection's 1-byte copy beside the attention output: 34 − 1 − 1 − 4 + 1 = 29; mxfp8 adds a
// scale byte per 32: 29 + 7 / 32 = 29.21875. Plus flash's log-sum-exp, 98,304 bytes, each time.
TEST(ActivationMemory, QuantisedRecipesKeepTheirGemmInputsLowPrecision) {
  using schemas::RecomputeGranularity;
  const double unit = 2048.0 * 12288 / 8;
  const schemas::Plan fp8_plan = gpt3_plan(8, true, schemas::Dtype::fp8, "dgx-h100");
  EXPECT_DOUBLE_EQ(
      layer_activation_bytes(layer_context(fp8_plan), RecomputeGranularity::none).stored,
      29 * unit + 98304.0);
  const schemas::Plan mxfp8_plan = gpt3_plan(8, true, schemas::Dtype::mxfp8, "dgx-b200");
  EXPECT_DOUBLE_EQ(
      layer_activation_bytes(layer_context(mxfp8_plan), RecomputeGranularity::none).stored,
      29.21875 * unit + 98304.0);
  const schemas::Plan bf16_plan = gpt3_plan(8, true, schemas::Dtype::bf16, "dgx-h100");
  EXPECT_DOUBLE_EQ(
      layer_activation_bytes(layer_context(bf16_plan), RecomputeGranularity::none).stored,
      34 * unit + 98304.0);
}

// What the backward writes into and what the LM head keeps differ by stack. gpt-tiny (h = 256,
// ffn 1024, 4 heads of 64) on 4 × 256 = 1024 tokens in fp32 (E = 4), one rank:
//   Megatron: the four GEMMs' output gradients, E·T·(3h + h + f + h) = 4·1024·2304 = 9,437,184;
//     LM head keeps its two inputs (2·E·T·h = 2,097,152) and the fp32 softmax (4·T·V = 1,048,576),
//     with the 16-bit logits' fp32 copy live while the loss runs (working 8·T·V = 2,097,152).
//   Strata's executor: one scratch for every layer, E·T·(2h + 5h + h + 3h + 2f) =
//     4·1024·4864 = 19,922,944; LM head keeps its inputs, the logits (E·T·V, overwritten by
//     their gradient) and the final norm's gradient (E·T·h): 4,194,304, nothing more at the loss.
//   NeMo (Megatron-Bridge's fused cross-entropy): the LM head's inputs and the logits holding their
//     gradient, 2,097,152 + E·T·V = 3,145,728 (in fp32 as many bytes as Megatron's softmax; in 16
//     bits half), and no copy while the loss runs.
TEST(ActivationMemory, StrataExecutorBuffersAgainstMegatrons) {
  schemas::PlanKnobs knobs;
  knobs.seq_length = 256;
  knobs.micro_batch_size = 4;
  knobs.global_batch_size = 4;
  knobs.precision = schemas::Dtype::fp32;
  using schemas::RecomputeGranularity;
  using schemas::TrainingFramework;
  knobs.framework = TrainingFramework::megatron_lm;
  const schemas::Plan megatron = schemas::build_plan(
      schemas::model_preset("gpt-tiny"), schemas::cluster_preset("cpu-local"), knobs, "test");
  knobs.framework = TrainingFramework::strata;
  const schemas::Plan strata = schemas::build_plan(
      schemas::model_preset("gpt-tiny"), schemas::cluster_preset("cpu-local"), knobs, "test");
  const LayerContext theirs = layer_context(megatron);
  const LayerContext ours = layer_context(strata);
  // What each layer keeps is the same set of tensors.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(ours, RecomputeGranularity::none).stored,
                   layer_activation_bytes(theirs, RecomputeGranularity::none).stored);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(theirs, RecomputeGranularity::none).working, 9437184.0);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(ours, RecomputeGranularity::none).working, 19922944.0);
  EXPECT_DOUBLE_EQ(lm_head_activation_bytes(theirs).stored, 3145728.0);
  EXPECT_DOUBLE_EQ(lm_head_activation_bytes(theirs).working, 2097152.0);
  EXPECT_DOUBLE_EQ(lm_head_activation_bytes(ours).stored, 4194304.0);
  EXPECT_DOUBLE_EQ(lm_head_activation_bytes(ours).working, 0.0);
  knobs.framework = TrainingFramework::nemo;
  const schemas::Plan nemo = schemas::build_plan(
      schemas::model_preset("gpt-tiny"), schemas::cluster_preset("cpu-local"), knobs, "test");
  const LayerContext fused_loss = layer_context(nemo);
  EXPECT_DOUBLE_EQ(lm_head_activation_bytes(fused_loss).stored, 3145728.0);
  EXPECT_DOUBLE_EQ(lm_head_activation_bytes(fused_loss).working, 0.0);
}

}  // namespace
}  // namespace strata::costmodels
