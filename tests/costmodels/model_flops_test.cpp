#include "strata/costmodels/model_flops.h"

#include <gtest/gtest.h>

#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

// GPT-2 124M at s = 1024, by hand: each layer's matrices hold 12h² = 7,077,888 weights
// (2 FLOPs each), attention adds 4·s·h = 3,145,728, and the tied LM head 2·V·h = 77,194,752:
// 12 × (14,155,776 + 3,145,728) + 77,194,752 = 284,812,800.
TEST(ModelFlops, Gpt2SmallByHand) {
  const FlopsPerToken flops = model_flops_per_token(schemas::model_preset("gpt2-124m"), 1024);
  EXPECT_DOUBLE_EQ(flops.forward, 284'812'800.0);
  EXPECT_DOUBLE_EQ(flops.backward, 2 * 284'812'800.0);
  EXPECT_DOUBLE_EQ(flops.training(), 854'438'400.0);
}

// Megatron-LM's count (Narayanan et al. 2021, eq. 3 without recomputation) for a GPT with a 4h
// MLP: per token, 72·l·h²·(1 + s/(6h) + V/(12·l·h)) for forward and backward.
TEST(ModelFlops, GptMatchesMegatronFormula) {
  for (std::string_view name : {"gpt3-1.7b", "gpt3-175b", "gpt3-1t"}) {
    const schemas::ModelConfig m = schemas::model_preset(name);
    const double l = m.num_layers, h = m.hidden_size, s = 2048, v = m.vocab_size;
    const double megatron = 72 * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
    EXPECT_NEAR(model_flops_per_token(m, 2048).training() / megatron, 1.0, 1e-12) << name;
  }
}

// For SwiGLU with GQA the matrices are q, o (h × h), k, v (h × kv width) and three h × ffn:
// Llama-3.1-8B at s = 8192: 32 × (2 × (2·4096² + 2·4096·1024 + 3·4096·14336) + 4·8192·4096)
// + 2 × 128256 × 4096 = 32 × (436,207,616 + 134,217,728) + 1,050,673,152 = 19,304,284,160.
TEST(ModelFlops, LlamaWithGroupedQueryAttentionByHand) {
  const FlopsPerToken flops = model_flops_per_token(schemas::model_preset("llama3.1-8b"), 8192);
  EXPECT_DOUBLE_EQ(flops.forward, 19'304'284'160.0);
}

// Mixtral 8×7B at s = 4096 counts the router and 2 of 8 experts: per layer 2 × (2·4096² +
// 2·4096·1024 + 4096·8 + 2 × 3·4096·14336) + 2·4096·(4096 + 4096) = 2 × 394,297,344 + 67,108,864
// = 855,703,552; × 32 + 2 × 32000 × 4096 = 27,644,657,664.
TEST(ModelFlops, MixtureOfExpertsCountsTheRouterAndTheVisitedExperts) {
  const schemas::ModelConfig mixtral = schemas::model_preset("mixtral-8x7b");
  EXPECT_DOUBLE_EQ(model_flops_per_token(mixtral, 4096).forward, 27'644'657'664.0);
  // Without attention's score FLOPs, forward is 2 × the active parameters less the token
  // embedding (a lookup) and the norms (no FLOPs counted).
  const ParameterBreakdown count = count_parameters(mixtral);
  const double no_scores = model_flops_per_token(mixtral, 0).forward;
  const double norms =
      static_cast<double>(count.num_layers * count.norms_per_layer + count.final_norm);
  EXPECT_DOUBLE_EQ(no_scores, 2.0 * (static_cast<double>(count.active()) -
                                     static_cast<double>(count.token_embedding) - norms));
}

// DeepSeek-V3's latent attention: QKᵀ over 192-wide and AV over 128-wide heads; the dense first
// three layers use the 18432-wide MLP. Cross-checked against the parameter counts: with no
// attention scores, forward = 2 × (active − token embedding − norms) (the LM head is untied).
TEST(ModelFlops, LatentAttentionAndDenseFirstLayers) {
  schemas::ModelConfig v3 = schemas::model_preset("deepseek-v3");
  v3.mtp.reset();  // the main model (its MTP module: MultiTokenPredictionAddsItsModule)
  const ParameterBreakdown count = count_parameters(v3);
  const double latent_norms = 61.0 * (1536 + 512);
  const double norms =
      static_cast<double>(count.num_layers * count.norms_per_layer + count.final_norm);
  const double expert_bias = 58.0 * 256;  // chooses experts, multiplies nothing
  EXPECT_DOUBLE_EQ(
      model_flops_per_token(v3, 0).forward,
      2.0 * (static_cast<double>(count.active()) - static_cast<double>(count.token_embedding) -
             norms - latent_norms - expert_bias));
  const double per_token_scores = 61.0 * 2.0 * 4096 * (128 * 192 + 128 * 128);
  EXPECT_DOUBLE_EQ(model_flops_per_token(v3, 4096).forward - model_flops_per_token(v3, 0).forward,
                   per_token_scores);
}

// Megatron's count of an MTP module: its layer (here DeepSeek-V3's MoE layer, with latent
// attention's scores), eh_proj (2h → h) and another pass through the head.
TEST(ModelFlops, MultiTokenPredictionAddsItsModule) {
  const schemas::ModelConfig v3 = schemas::model_preset("deepseek-v3");
  schemas::ModelConfig main_model = v3;
  main_model.mtp.reset();
  const ParameterBreakdown count = count_parameters(v3);
  const double h = 7168, vocab = 129280;
  const double layer_multiplied = static_cast<double>(
      count.mtp_layer() - count.norms_per_layer - (1536 + 512) - 256 -
      (count.num_routed_experts - count.experts_per_token) * count.routed_expert);
  const double scores = 2.0 * 4096 * (128 * 192 + 128 * 128);
  EXPECT_DOUBLE_EQ(
      model_flops_per_token(v3, 4096).forward - model_flops_per_token(main_model, 4096).forward,
      2.0 * layer_multiplied + 2.0 * 2 * h * h + 2.0 * vocab * h + scores);
}

}  // namespace
}  // namespace strata::costmodels
