// The whole model: gradients of the full gpt and llama graphs against finite differences, parameter
// lists against the cost model's counts, and sharded initialisation.
#include "strata/executor/model/transformer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "strata/costmodels/parameter_count.h"
#include "strata/executor/model/parameter_init.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/presets.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

using schemas::ModelConfig;

ModelConfig small_model(schemas::Architecture architecture) {
  ModelConfig model = ModelConfig::defaults_for(architecture);
  model.name = "small";
  model.num_layers = 2;
  model.hidden_size = 8;
  model.ffn_hidden_size = 12;
  model.num_attention_heads = 4;
  model.num_kv_heads = architecture == schemas::Architecture::llama ? 2 : 4;
  model.head_dim = 2;
  model.vocab_size = 11;
  model.max_seq_length = 6;
  return model;
}

Tensor tokens(std::int64_t batch, std::int64_t seq, std::int32_t offset) {
  Tensor ids = Tensor::zeros({batch, seq}, ScalarType::int32);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    ids.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 7 + offset) % 11);
  }
  return ids;
}

// Every parameter's gradient, element by element, against central differences of the loss
// (float64 end to end): any wrong or missing term anywhere in the graph shows.
void expect_model_gradients_match(const ModelConfig& model) {
  Transformer transformer(model, ScalarType::float64, 42);
  // Scale the init up so that every path carries a visible signal.
  for (std::int64_t i = 0; i < transformer.parameters().total_elements(); ++i) {
    transformer.parameters().values().data<double>()[i] *= 10;
  }
  const Tensor inputs = tokens(2, 5, 1);
  const Tensor targets = tokens(2, 5, 4);
  const DropoutContext dropout{.seed = 5, .step = 2, .first_token = 0};
  transformer.parameters().zero_gradients();
  transformer.forward_backward(inputs, targets, 1.0 / 10, dropout);
  Tensor analytic =
      Tensor::zeros(transformer.parameters().gradients().shape(), ScalarType::float64);
  analytic.copy_from(transformer.parameters().gradients());
  testing::expect_gradient_matches(
      transformer.parameters().values(), analytic,
      [&] { return transformer.forward_loss(inputs, targets, dropout); }, model.name.c_str(), 1e-5);
}

TEST(Transformer, GptGradientsMatchFiniteDifferencesWithDropout) {
  ModelConfig model = small_model(schemas::Architecture::gpt);
  model.name = "gpt with dropout 0.2";
  model.dropout = 0.2;
  expect_model_gradients_match(model);
}

TEST(Transformer, LlamaGradientsMatchFiniteDifferences) {
  ModelConfig model = small_model(schemas::Architecture::llama);
  model.name = "llama (GQA, rope, untied)";
  expect_model_gradients_match(model);
}

TEST(Transformer, ParameterListsMatchTheCostModelsCountsForEveryBuildablePreset) {
  int checked = 0;
  for (std::string_view name : schemas::model_preset_names()) {
    const ModelConfig model = schemas::model_preset(name);
    check_executor_supports(model, "preset", "");  // every preset is built
    std::int64_t total = 0;
    for (const ParameterSpec& spec : transformer_parameters(model))
      total += shape_numel(spec.shape);
    EXPECT_EQ(total, costmodels::count_parameters(model).total()) << name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(schemas::model_preset_names().size()));
}

// The CUDA backend has no kernels for ALiBi, squared ReLU, the embedding and query/key norms and
// latent attention yet: a model with one is refused there by the field, before anything is
// allocated.
TEST(Transformer, FeaturesWithoutCudaKernelsAreRefusedOnCuda) {
  EXPECT_EQ(cuda_model_refusal(schemas::model_preset("bloom-176b"))->json_path,
            "/position_embedding");
  EXPECT_EQ(cuda_model_refusal(schemas::model_preset("qwen3-8b"))->json_path, "/qk_norm");
  ModelConfig squared_relu = schemas::model_preset("gpt-tiny");
  squared_relu.mlp_activation = schemas::MlpActivation::squared_relu;
  EXPECT_EQ(cuda_model_refusal(squared_relu)->json_path, "/mlp_activation");
  EXPECT_EQ(cuda_model_refusal(schemas::model_preset("deepseek-v3"))->json_path, "/mla");
  EXPECT_FALSE(cuda_model_refusal(schemas::model_preset("llama3.1-8b")).has_value());
  try {
    Transformer transformer(schemas::model_preset("bloom-176b"), ScalarType::float32, 1,
                            Device::cuda);
    FAIL() << "ALiBi accepted on CUDA";
  } catch (const schemas::InputError& error) {
    EXPECT_EQ(error.json_path(), "/position_embedding");
    EXPECT_NE(std::string(error.what()).find("CUDA"), std::string::npos);
  }
}

TEST(ParameterInit, AnyShardEqualsTheSameElementsOfTheWholeTensor) {
  Transformer transformer(schemas::model_preset("gpt-tiny"), ScalarType::float32, 1234);
  const ParameterEntry& qkv = transformer.parameters().entry("layers.1.attention.qkv.weight");
  // Rows 256..511 (the k heads), as a tp rank of part 2 would create them alone.
  const std::int64_t columns = qkv.value.size(1);
  Tensor shard = Tensor::zeros({256, columns}, ScalarType::float32);
  initialize_elements(shard, qkv.spec.init, 1234, qkv.spec.name, 256 * columns);
  for (std::int64_t i = 0; i < shard.numel(); ++i) {
    ASSERT_EQ(shard.data<float>()[i], qkv.value.data<float>()[256 * columns + i]) << i;
  }
  // N(0, 0.02²) over 196,608 elements: the sample deviation is within 1% of 0.02.
  double sum_of_squares = 0;
  for (std::int64_t i = 0; i < qkv.value.numel(); ++i) {
    sum_of_squares += std::pow(qkv.value.data<float>()[i], 2);
  }
  EXPECT_NEAR(std::sqrt(sum_of_squares / static_cast<double>(qkv.value.numel())), 0.02, 2e-4);
  // Another seed, other numbers; the same seed, the same numbers.
  Transformer same(schemas::model_preset("gpt-tiny"), ScalarType::float32, 1234);
  Transformer other(schemas::model_preset("gpt-tiny"), ScalarType::float32, 1235);
  EXPECT_EQ(testing::max_relative_difference(same.parameters().values(),
                                             transformer.parameters().values()),
            0.0);
  EXPECT_GT(testing::max_relative_difference(other.parameters().values(),
                                             transformer.parameters().values()),
            0.0);
}

}  // namespace
}  // namespace strata::executor
