#include "strata/schemas/model_config.h"

#include <gtest/gtest.h>

#include "fixture_paths.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/json_file.h"

namespace strata::schemas {
namespace {

using strata::testing::fixture;

TEST(ModelConfig, ArchitectureDefaultsFillWhatAFileLeavesOut) {
  const ModelConfig gpt = load_model_file(fixture("model/valid/gpt-minimal.json"));
  EXPECT_EQ(gpt.num_kv_heads, 4);
  EXPECT_EQ(gpt.head_dim, 64);
  EXPECT_TRUE(gpt.tied_embeddings);
  EXPECT_EQ(gpt.position_embedding, PositionEmbedding::learned);
  EXPECT_EQ(gpt.norm, NormKind::layernorm);
  EXPECT_EQ(gpt.mlp_activation, MlpActivation::gelu);
  EXPECT_TRUE(gpt.qkv_bias && gpt.attention_output_bias && gpt.mlp_bias);
  EXPECT_FALSE(gpt.rope_theta);
  EXPECT_DOUBLE_EQ(gpt.norm_epsilon, 1e-5);

  const ModelConfig qwen = load_model_file(fixture("model/valid/qwen-style-head-dim.json"));
  EXPECT_EQ(qwen.head_dim, 128) << "an explicit head_dim wins over hidden/heads = 80";
  EXPECT_EQ(qwen.position_embedding, PositionEmbedding::rope);
  EXPECT_EQ(qwen.rope_theta, 10000.0);
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_FALSE(qwen.attention_output_bias);
  EXPECT_TRUE(qwen.tied_embeddings);
}

TEST(ModelConfig, IntegralFloatsCountAsIntegers) {
  EXPECT_EQ(load_model_file(fixture("model/valid/squared-relu-integral-floats.json")).num_layers,
            4);
}

TEST(ModelConfig, EveryValidFixtureRoundTripsThroughItsSerialization) {
  for (const auto& entry : std::filesystem::directory_iterator(fixture("model/valid"))) {
    const ModelConfig model = load_model_file(entry.path());
    const nlohmann::json serialized = model_to_json(model);
    EXPECT_EQ(parse_model(serialized, JsonLocation("again")), model) << entry.path();
    EXPECT_EQ(model_to_json(parse_model(serialized, JsonLocation("again"))), serialized);
  }
}

}  // namespace
}  // namespace strata::schemas
