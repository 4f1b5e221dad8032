#include "strata/schemas/executor_admission.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::schemas {
namespace {

Plan llama_plan() {
  PlanKnobs knobs;
  knobs.seq_length = 64;
  knobs.global_batch_size = 8;
  knobs.micro_batch_size = 1;
  knobs.mesh = Mesh{.tp = 2, .cp = 2, .dp = 2, .pp = 1, .dp_shard = 0};
  knobs.zero_stage = 3;
  knobs.precision = Dtype::fp32;
  return build_plan(model_preset("llama-tiny"), cluster_preset("cpu-local:8"), knobs, "test");
}

TEST(ExecutorAdmission, AdmitsEveryLayoutOfAModelItBuilds) {
  Plan plan = llama_plan();
  EXPECT_FALSE(executor_refusal(plan).has_value());
  plan.precision = Dtype::bf16;  // a CUDA run's precision: a backend's gap, not the rule's
  EXPECT_FALSE(executor_refusal(plan).has_value());
}

TEST(ExecutorAdmission, RefusesWithTheFieldAndTheRule) {
  const auto refused_at = [](const Plan& plan) {
    const std::optional<ExecutorRefusal> refusal = executor_refusal(plan);
    return refusal ? refusal->json_path : std::string("admitted");
  };
  Plan other_stack = llama_plan();
  other_stack.framework = TrainingFramework::megatron_lm;
  EXPECT_EQ(refused_at(other_stack), "/framework");
  EXPECT_NE(executor_refusal(other_stack)->rule.find("simulation only"), std::string::npos);

  Plan overlapped = llama_plan();
  overlapped.tp_comm_overlap = true;
  EXPECT_EQ(refused_at(overlapped), "/tp_comm_overlap");

  Plan fp8 = llama_plan();
  fp8.precision = Dtype::fp8;
  EXPECT_EQ(refused_at(fp8), "/precision");

  // The executor's gradients are fp32 whatever the compute dtype (a bf16 plan's default).
  Plan bf16_gradients = llama_plan();
  bf16_gradients.precision = Dtype::bf16;
  bf16_gradients.gradient_dtype = Dtype::bf16;
  EXPECT_EQ(refused_at(bf16_gradients), "/gradient_dtype");
  bf16_gradients.gradient_dtype = Dtype::fp32;
  EXPECT_EQ(refused_at(bf16_gradients), "admitted");

  // It recomputes whole layers, not Megatron-Core's modules.
  Plan modules = llama_plan();
  modules.recompute = {RecomputeGranularity::selective, {}, {RecomputeModule::core_attn}};
  EXPECT_EQ(refused_at(modules), "/recompute/modules");

  // Every position embedding, MLP activation and norm the format has is built (on the CPU; the
  // CUDA backend's gaps are the executor's check_plan_runs', by device).
  Plan features = llama_plan();
  features.model.position_embedding = PositionEmbedding::alibi;
  features.model.rope_theta.reset();
  features.model.mlp_activation = MlpActivation::squared_relu;
  features.model.embedding_norm = true;
  features.model.qk_norm = true;
  EXPECT_EQ(refused_at(features), "admitted");
}

TEST(ExecutorAdmission, TheModelRuleAloneNamesPathsInsideTheModel) {
  // BLOOM (ALiBi, an embedding norm) and Qwen3 (query/key norms) train.
  EXPECT_FALSE(executor_model_refusal(model_preset("bloom-176b")).has_value());
  EXPECT_FALSE(executor_model_refusal(model_preset("gpt2-124m")).has_value());
  EXPECT_FALSE(executor_model_refusal(model_preset("qwen3-30b-a3b")).has_value());
  EXPECT_FALSE(executor_model_refusal(model_preset("qwen3-8b")).has_value());
  // Every router is the executor's: Mixtral's (softmax top-2) and DeepSeek-V3's (sigmoid, an
  // expert bias, group-limited), and so is DeepSeek-V3's latent attention.
  EXPECT_FALSE(executor_model_refusal(model_preset("mixtral-8x7b")).has_value());
  EXPECT_FALSE(executor_model_refusal(model_preset("moe-tiny")).has_value());
  EXPECT_FALSE(executor_model_refusal(model_preset("deepseek-v3")).has_value());
}

TEST(ExecutorAdmission, MixtureOfExpertsRunsOnEveryMesh) {
  PlanKnobs knobs;
  knobs.seq_length = 64;
  knobs.global_batch_size = 8;
  knobs.micro_batch_size = 1;
  knobs.mesh = Mesh{.tp = 1, .cp = 1, .dp = 4, .pp = 2, .dp_shard = 0};
  knobs.zero_stage = 3;
  knobs.precision = Dtype::fp32;
  const Plan admitted =
      build_plan(model_preset("moe-tiny"), cluster_preset("cpu-local:8"), knobs, "test");
  EXPECT_FALSE(executor_refusal(admitted).has_value());
  // Each expert's width split over etp ranks, with ep, and over the tp ranks too.
  Plan expert_tensor_parallel = admitted;
  expert_tensor_parallel.mesh.etp = 2;
  EXPECT_FALSE(executor_refusal(expert_tensor_parallel).has_value());
  expert_tensor_parallel.mesh.ep = 2;
  EXPECT_FALSE(executor_refusal(expert_tensor_parallel).has_value());
  // Tensor parallelism routes each rank's sequence-parallel shard of the tokens (plan validation
  // requires sequence parallelism there): tp 2 runs, the experts split over the tp pair too.
  Plan tensor_parallel = admitted;
  tensor_parallel.mesh.tp = 2;
  tensor_parallel.mesh.dp = 2;
  tensor_parallel.sequence_parallel = true;
  EXPECT_FALSE(executor_refusal(tensor_parallel).has_value());
  tensor_parallel.mesh.ep = 2;
  EXPECT_FALSE(executor_refusal(tensor_parallel).has_value());
  // Context parallelism, with the experts split over the cp group's ranks too.
  Plan context_parallel = admitted;
  context_parallel.mesh.cp = 2;
  context_parallel.mesh.dp = 2;
  EXPECT_FALSE(executor_refusal(context_parallel).has_value());
  context_parallel.mesh.ep = 4;
  EXPECT_FALSE(executor_refusal(context_parallel).has_value());
  // Expert parallelism runs at every ZeRO stage (the experts' state sharded over the ranks that
  // hold the same experts), with hybrid sharding too.
  for (std::int64_t zero_stage = 0; zero_stage <= 3; ++zero_stage) {
    Plan expert_parallel = admitted;
    expert_parallel.mesh.ep = 2;
    expert_parallel.zero_stage = zero_stage;
    EXPECT_FALSE(executor_refusal(expert_parallel).has_value()) << "ZeRO-" << zero_stage;
    expert_parallel.mesh.dp_shard = 2;
    EXPECT_FALSE(executor_refusal(expert_parallel).has_value()) << "HSDP, ZeRO-" << zero_stage;
  }
}

}  // namespace
}  // namespace strata::schemas
