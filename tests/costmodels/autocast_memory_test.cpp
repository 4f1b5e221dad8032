// Memory of a stack that trains fp32 parameters under torch.autocast (the `pytorch` framework),
// by hand on GPT-2 350M: hidden h = 1,024, MLP 4h, 16 heads, biases, tied embedding, vocab V =
// 50,257, dropout 0.1, flash attention, one sequence of T = 1,024 tokens, bf16 autocast, one GPU.
// Beside it, Megatron-LM's bf16 mixed precision on the same plan: the two differ only in what
// autocast changes, so each difference below is one of its rules (activation_memory.h,
// model_state_memory.h). tests/reference/autocast_saved_tensors_test.py holds the per-layer rule
// against what PyTorch's autograd keeps.
#include <gtest/gtest.h>

#include "strata/costmodels/activation_memory.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/costmodels/plan_costs.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using schemas::Dtype;
using schemas::TrainingFramework;

constexpr double kHidden = 1024;
constexpr double kTokens = 1024;
constexpr double kVocab = 50257;

schemas::Plan gpt2_plan(TrainingFramework framework, std::int64_t zero_stage = 0,
                        std::int64_t gpus = 1) {
  schemas::PlanKnobs knobs;
  knobs.seq_length = 1024;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = gpus;
  knobs.framework = framework;
  knobs.precision = Dtype::bf16;
  knobs.zero_stage = zero_stage;
  knobs.mesh.dp = gpus;
  const std::string cluster = "dgx-a100-80gb:1x" + std::to_string(gpus);
  return schemas::build_plan(schemas::model_preset("gpt2-350m"), schemas::cluster_preset(cluster),
                             knobs, "test");
}

// The stack's model states are those of fp32 training whatever the GEMMs run in; a stack that
// does not autocast, or a precision autocast does not reach, keeps the precision's.
TEST(AutocastMemory, ModelStatesOfAnAutocastStackAreFp32) {
  EXPECT_EQ(model_state_dtype(Dtype::bf16, TrainingFramework::pytorch), Dtype::fp32);
  EXPECT_EQ(model_state_dtype(Dtype::fp16, TrainingFramework::pytorch), Dtype::fp32);
  EXPECT_EQ(model_state_dtype(Dtype::fp8, TrainingFramework::pytorch), Dtype::fp8);
  EXPECT_EQ(model_state_dtype(Dtype::bf16, TrainingFramework::megatron_lm), Dtype::bf16);
  // Gradients default to the parameters' fp32 (fp16 training elsewhere keeps fp16 ones); a plan
  // that names its gradient dtype keeps it.
  const ModelStateDtypes fp16 =
      model_state_dtypes(Dtype::fp16, std::nullopt, TrainingFramework::pytorch);
  EXPECT_EQ(fp16.gradients, Dtype::fp32);
  EXPECT_EQ(model_state_dtypes(Dtype::fp16, std::nullopt, TrainingFramework::megatron_lm).gradients,
            Dtype::fp16);
  EXPECT_EQ(model_state_dtypes(Dtype::bf16, Dtype::bf16, TrainingFramework::pytorch).gradients,
            Dtype::bf16);
}

// P parameters on one GPU: 4P + 4P + 8P (no master copy) against Megatron's 2P + 4P + 12P; under
// ZeRO-1 over 8 GPUs the optimizer's 8P is what is split.
TEST(AutocastMemory, RankStatesAreFourFourAndEightBytesPerParameter) {
  const double parameters =
      static_cast<double>(count_parameters(schemas::model_preset("gpt2-350m")).total());
  const RankStateMemory eager = plan_costs(gpt2_plan(TrainingFramework::pytorch)).rank_states[0];
  EXPECT_DOUBLE_EQ(eager.weights_bytes, 4 * parameters);
  EXPECT_DOUBLE_EQ(eager.gradients_bytes, 4 * parameters);
  EXPECT_DOUBLE_EQ(eager.optimizer_bytes, 8 * parameters);
  const RankStateMemory megatron =
      plan_costs(gpt2_plan(TrainingFramework::megatron_lm)).rank_states[0];
  EXPECT_DOUBLE_EQ(megatron.weights_bytes, 2 * parameters);
  EXPECT_DOUBLE_EQ(megatron.optimizer_bytes, 12 * parameters);
  const RankStateMemory sharded =
      plan_costs(gpt2_plan(TrainingFramework::pytorch, 1, 8)).rank_states[0];
  EXPECT_DOUBLE_EQ(sharded.weights_bytes, 4 * parameters);
  EXPECT_DOUBLE_EQ(sharded.optimizer_bytes, 8 * parameters / 8);
}

// Per layer and micro-batch: the two norm inputs in fp32, 2·(4 − 2)·Th more, and the 16-bit
// copies of the four weight matrices (12h²), 2·12h²; the dropout masks, flash attention's
// log-sum-exp and the GEMMs' 16-bit inputs are the same. Full recomputation keeps only the layer's
// fp32 input.
TEST(AutocastMemory, LayerKeepsFp32NormInputsAndItsWeightCopies) {
  const schemas::Plan eager_plan = gpt2_plan(TrainingFramework::pytorch);
  const schemas::Plan megatron_plan = gpt2_plan(TrainingFramework::megatron_lm);
  const LayerContext eager = layer_context(eager_plan);
  const LayerContext megatron = layer_context(megatron_plan);
  const auto none = schemas::RecomputeGranularity::none;
  const double stream = kTokens * kHidden;
  EXPECT_DOUBLE_EQ(
      layer_activation_bytes(eager, none).stored - layer_activation_bytes(megatron, none).stored,
      2 * 2 * stream + 2 * 12 * kHidden * kHidden);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(eager, schemas::RecomputeGranularity::full).stored,
                   4 * stream);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(megatron, schemas::RecomputeGranularity::full).stored,
                   2 * stream);
}

// Unfused attention, per score: autocast's fp32 softmax output (4), the dropout mask (1) and the
// 16-bit copy the product with V casts (2): 7 bytes where Megatron's keeps the 16-bit softmax,
// the mask and the dropout's 16-bit output, 5 — two bytes more for each of 16 heads × T² scores.
TEST(AutocastMemory, UnfusedAttentionKeepsTheFp32SoftmaxAndItsSixteenBitCopy) {
  schemas::Plan eager_plan = gpt2_plan(TrainingFramework::pytorch);
  schemas::Plan megatron_plan = gpt2_plan(TrainingFramework::megatron_lm);
  eager_plan.attention = megatron_plan.attention = schemas::AttentionKernel::unfused;
  const auto none = schemas::RecomputeGranularity::none;
  const double stream = kTokens * kHidden;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(layer_context(eager_plan), none).stored -
                       layer_activation_bytes(layer_context(megatron_plan), none).stored,
                   2 * 2 * stream + 2 * 12 * kHidden * kHidden + 2 * 16 * kTokens * kTokens);
}

// The LM head: the final norm's input in fp32 (2·Th more) and the 16-bit copy of the tied
// embedding it multiplies by (2·V·h); the fp32 log-softmax the loss keeps is the same.
TEST(AutocastMemory, HeadKeepsTheFinalNormInputInFp32AndItsWeightCopy) {
  const schemas::Plan eager_plan = gpt2_plan(TrainingFramework::pytorch);
  const schemas::Plan megatron_plan = gpt2_plan(TrainingFramework::megatron_lm);
  EXPECT_DOUBLE_EQ(lm_head_activation_bytes(layer_context(eager_plan)).stored -
                       lm_head_activation_bytes(layer_context(megatron_plan)).stored,
                   2 * kTokens * kHidden + 2 * kVocab * kHidden);
}

}  // namespace
}  // namespace strata::costmodels
