// The element-wise work of unfused stacks (unfused_elementwise.h), counted and sized by hand on
// GPT-2 350M: hidden h = 1,024, MLP 4h, 16 heads, biases everywhere, dropout 0.1, flash attention,
// one sequence of T = 1,024 tokens, bf16 (2-byte activations), no tp.
#include <gtest/gtest.h>

#include "strata/costmodels/layer_costs.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using schemas::TrainingFramework;

constexpr double kHidden = 1024;
constexpr double kTokens = 1024;
constexpr double kVocab = 50257;
constexpr double kBandwidthBytesPerS = 1e12;

// On a GPU whose memory-bound kernels stream at exactly 1 TB/s with no launch floor, each pass's
// memory-bound time is its bytes over 1e12: differences between stacks are differences in bytes.
schemas::Plan gpt2_plan(TrainingFramework framework,
                        schemas::Dtype precision = schemas::Dtype::bf16) {
  schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-a100-80gb:1x1");
  cluster.gpu.hbm_bandwidth_gb_per_s = kBandwidthBytesPerS / 1e9;
  cluster.gpu.hbm_efficiency_by_bytes.clear();
  cluster.gpu.kernel_launch_us = 0;
  schemas::PlanKnobs knobs;
  knobs.seq_length = 1024;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 1;
  knobs.framework = framework;
  knobs.precision = precision;
  return schemas::build_plan(schemas::model_preset("gpt2-350m"), cluster, knobs, "test");
}

PassCosts layer_of(TrainingFramework framework, schemas::Dtype precision = schemas::Dtype::bf16) {
  return transformer_layer_costs(layer_context(gpt2_plan(framework, precision)),
                                 schemas::RecomputeGranularity::none);
}

// The fused count (Megatron-LM): forward 10, backward 16 + 4 weight-gradient GEMMs
// (host_issue_test.cpp). A plain PyTorch loop under autocast adds, forward, the casts of the four
// weights, the four biases and the two norms' outputs, and each residual branch's dropout apart
// from its add: 10 + 10 + 2 = 22. Backward: the norms' input gradients cast to fp32, the two
// dropouts' masks, the q/k/v gradients concatenated: 16 + 5 = 21; weight gradients: the GEMMs,
// then four weight and four bias gradients cast to fp32 and four bias sums: 4 + 12 = 16. Without
// dropout that is 55 kernels a layer against the fused stack's 30: what nanoGPT's layer launches
// (bench/gpu/small_kernel_probe.py profiled 553 for eight such layers with the embedding, head,
// loss and optimizer).
TEST(UnfusedElementwise, KernelsOfAnEagerPyTorchLayerCountedByHand) {
  const PassCosts fused = layer_of(TrainingFramework::megatron_lm);
  ASSERT_EQ(fused.forward.kernels, 10);
  ASSERT_EQ(fused.backward_input.kernels, 16);
  ASSERT_EQ(fused.backward_weight.kernels, 4);
  const PassCosts eager = layer_of(TrainingFramework::pytorch);
  EXPECT_EQ(eager.forward.kernels, 22);
  EXPECT_EQ(eager.backward_input.kernels, 21);
  EXPECT_EQ(eager.backward_weight.kernels, 16);
  // Megatron-DeepSpeed fuses its element-wise ops and keeps 16-bit weights; only its four bias
  // gradients are reductions of their own.
  const PassCosts deepspeed = layer_of(TrainingFramework::megatron_deepspeed);
  EXPECT_EQ(deepspeed.forward.kernels, 10);
  EXPECT_EQ(deepspeed.backward_input.kernels, 16);
  EXPECT_EQ(deepspeed.backward_weight.kernels, 8);
}

// Bytes, with T = h = 1,024 (stream Th, weights 12h², biases 3h + h + 4h + h = 9h):
//   forward   norms 2·2·(4 − 2)·Th and residual adds 2·((4 + 2 + 4) − 3·2)·Th wider: 16Th;
//             casts (4 + 2)·(12h² + 9h + 2Th); dropouts 2·(2 + 2)·Th: 36Th + 72h² + 54h
//   backward  the widened bytes twice, 32Th; input-gradient casts 6·2Th; dropouts 8Th; the q/k/v
//             concatenation 2·2·3hT: 64Th
//   weights   gradient casts 6·(12h² + 9h); bias sums read 2·T·9h: 72h² + 54h + 18Th
TEST(UnfusedElementwise, BytesOfAnEagerPyTorchLayerByHand) {
  const PassCosts fused = layer_of(TrainingFramework::megatron_lm);
  const PassCosts eager = layer_of(TrainingFramework::pytorch);
  const double stream = kTokens * kHidden;
  const double weights = 12 * kHidden * kHidden;
  const double biases = 9 * kHidden;
  EXPECT_NEAR((eager.forward.compute_s - fused.forward.compute_s) * kBandwidthBytesPerS,
              36 * stream + 6 * weights + 6 * biases, 1);
  EXPECT_NEAR(
      (eager.backward_input.compute_s - fused.backward_input.compute_s) * kBandwidthBytesPerS,
      64 * stream, 1);
  EXPECT_NEAR(
      (eager.backward_weight.compute_s - fused.backward_weight.compute_s) * kBandwidthBytesPerS,
      6 * weights + 6 * biases + 18 * stream, 1);
  // Megatron-DeepSpeed: the bias sums alone.
  const PassCosts deepspeed = layer_of(TrainingFramework::megatron_deepspeed);
  EXPECT_NEAR(
      (deepspeed.backward_weight.compute_s - fused.backward_weight.compute_s) * kBandwidthBytesPerS,
      18 * stream, 1);
  EXPECT_DOUBLE_EQ(deepspeed.forward.compute_s, fused.forward.compute_s);
}

// Autocast casts 16-bit plans only: in fp32 there is nothing to cast, and what is left is the
// unfused ops (the dropouts, the concatenation) and the bias sums, on 4-byte activations.
TEST(UnfusedElementwise, AnFp32PlanCastsNothing) {
  const PassCosts fused = layer_of(TrainingFramework::megatron_lm, schemas::Dtype::fp32);
  const PassCosts eager = layer_of(TrainingFramework::pytorch, schemas::Dtype::fp32);
  EXPECT_EQ(eager.forward.kernels - fused.forward.kernels, 2);
  EXPECT_EQ(eager.backward_input.kernels - fused.backward_input.kernels, 3);
  EXPECT_EQ(eager.backward_weight.kernels - fused.backward_weight.kernels, 4);
  const double stream = kTokens * kHidden;
  EXPECT_NEAR((eager.forward.compute_s - fused.forward.compute_s) * kBandwidthBytesPerS,
              2 * (4 + 4) * stream, 1);
}

// The LM head under autocast: the final norm in fp32 (2·(4 − 2)·Th more forward, twice that
// backward), its output and the tied head weight cast forward (6·(Th + Vh), two kernels), their
// gradients cast back (6·Th backward, 6·Vh with the weight gradient). PyTorch's cross-entropy
// backward writes the one-hot gradient and runs log-softmax's backward: 16·T·V bytes and two
// kernels beyond the fused pair.
TEST(UnfusedElementwise, TheEagerLossAndHead) {
  const PassCosts fused = lm_head_costs(layer_context(gpt2_plan(TrainingFramework::megatron_lm)));
  const PassCosts eager = lm_head_costs(layer_context(gpt2_plan(TrainingFramework::pytorch)));
  const double stream = kTokens * kHidden;
  const double head = kVocab * kHidden;
  EXPECT_EQ(eager.forward.kernels - fused.forward.kernels, 2);
  EXPECT_EQ(eager.backward_input.kernels - fused.backward_input.kernels, 3);
  EXPECT_EQ(eager.backward_weight.kernels - fused.backward_weight.kernels, 1);
  EXPECT_NEAR((eager.forward.compute_s - fused.forward.compute_s) * kBandwidthBytesPerS,
              4 * stream + 6 * (stream + head), 1);
  EXPECT_NEAR(
      (eager.backward_input.compute_s - fused.backward_input.compute_s) * kBandwidthBytesPerS,
      8 * stream + 6 * stream + 16 * kTokens * kVocab, 1);
  EXPECT_NEAR(
      (eager.backward_weight.compute_s - fused.backward_weight.compute_s) * kBandwidthBytesPerS,
      6 * head, 1);
}

}  // namespace
}  // namespace strata::costmodels
