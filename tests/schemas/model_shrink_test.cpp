// The tiny copy of a model (schemas/model_shrink.h): valid, small, and with every feature of the
// original that the executor and the cost models read.
#include "strata/schemas/model_shrink.h"

#include <gtest/gtest.h>

#include "strata/schemas/presets.h"

namespace strata::schemas {
namespace {

TEST(ShrinkModel, EveryPresetShrinksToAValidTinyModelWithItsFeatures) {
  for (std::string_view name : model_preset_names()) {
    SCOPED_TRACE(name);
    const ModelConfig model = model_preset(name);
    const ModelConfig shrunk = shrink_model(model);
    EXPECT_EQ(shrunk.name, std::string(name) + "-shrunk");
    EXPECT_LE(shrunk.hidden_size, 32);
    EXPECT_LE(shrunk.num_layers, 4);
    EXPECT_EQ(shrunk.dropout, 0.0);
    // The features.
    EXPECT_EQ(shrunk.architecture, model.architecture);
    EXPECT_EQ(shrunk.position_embedding, model.position_embedding);
    EXPECT_EQ(shrunk.rope_theta, model.rope_theta);
    EXPECT_EQ(shrunk.norm, model.norm);
    EXPECT_EQ(shrunk.mlp_activation, model.mlp_activation);
    EXPECT_EQ(shrunk.qkv_bias, model.qkv_bias);
    EXPECT_EQ(shrunk.mlp_bias, model.mlp_bias);
    EXPECT_EQ(shrunk.tied_embeddings, model.tied_embeddings);
    EXPECT_EQ(shrunk.qk_norm, model.qk_norm);
    EXPECT_EQ(shrunk.embedding_norm, model.embedding_norm);
    EXPECT_EQ(shrunk.mla.has_value(), model.mla.has_value());
    // The kind of attention: multi-head stays multi-head, grouped stays grouped.
    EXPECT_EQ(shrunk.num_kv_heads == shrunk.num_attention_heads,
              model.num_kv_heads == model.num_attention_heads);
    EXPECT_EQ(shrunk.num_kv_heads == 1, model.num_kv_heads == 1);
    ASSERT_EQ(shrunk.moe.has_value(), model.moe.has_value());
    if (!model.moe) continue;
    const MoeConfig& moe = *shrunk.moe;
    // The router as it was, but for the groups, which shrink with the experts.
    RouterConfig router = moe.router;
    router.expert_groups = model.moe->router.expert_groups;
    router.groups_per_token = model.moe->router.groups_per_token;
    EXPECT_EQ(router, model.moe->router);
    EXPECT_EQ(moe.router.score_function, model.moe->router.score_function);
    EXPECT_EQ(moe.router.expert_bias, model.moe->router.expert_bias);
    EXPECT_EQ(moe.router.expert_groups > 1, model.moe->router.expert_groups > 1);
    EXPECT_EQ(moe.capacity_factor, model.moe->capacity_factor);
    EXPECT_EQ(moe.shared_expert_gate, model.moe->shared_expert_gate);
    EXPECT_EQ(moe.num_shared_experts > 0, model.moe->num_shared_experts > 0);
    EXPECT_EQ(moe.first_dense_layers > 0, model.moe->first_dense_layers > 0);
    EXPECT_EQ(moe.moe_layer_interval > 1, model.moe->moe_layer_interval > 1);
    EXPECT_EQ(moe.num_moe_layers(shrunk.num_layers), 2);
    EXPECT_LE(moe.num_experts, 8);
  }
}

TEST(ShrinkModel, DeepSeekV3KeepsLatentAttentionAndGroupLimitedRouting) {
  const ModelConfig shrunk = shrink_model(model_preset("deepseek-v3"));
  ASSERT_TRUE(shrunk.mla && shrunk.moe);
  EXPECT_GT(shrunk.mla->q_lora_rank, 0);
  EXPECT_EQ(shrunk.head_dim, shrunk.mla->qk_head_dim());
  EXPECT_EQ(shrunk.moe->router.expert_groups, 4);
  EXPECT_EQ(shrunk.moe->router.groups_per_token, 2);
  EXPECT_EQ(shrunk.moe->first_dense_layers, 1);
  EXPECT_EQ(shrunk.num_layers, 3);
  ASSERT_TRUE(shrunk.mtp) << "its multi-token-prediction module trains in the tiny copy too";
  EXPECT_EQ(shrunk.mtp->num_modules, 1);
}

}  // namespace
}  // namespace strata::schemas
