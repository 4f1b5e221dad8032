// The mixture-of-experts MLP: every parameter's gradient and the input's against finite
// differences of the layer (router losses included), for both MLP kinds, with and without
// capacity dropping, shared experts and their gate; and the layout of its parameters.
#include "strata/executor/model/moe_mlp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "strata/schemas/presets.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

using schemas::ModelConfig;

// A MoE layer small enough to difference every parameter: 4 experts, top 2.
ModelConfig small_moe_model(bool llama) {
  ModelConfig model = schemas::model_preset("moe-tiny");
  model.hidden_size = 8;
  model.mlp_activation = llama ? schemas::MlpActivation::swiglu : schemas::MlpActivation::gelu;
  model.mlp_bias = !llama;
  schemas::MoeConfig& moe = *model.moe;
  moe.num_experts = 4;
  moe.experts_per_token = 2;
  moe.expert_ffn_hidden_size = 6;
  moe.num_shared_experts = llama ? 1 : 2;
  moe.shared_expert_ffn_hidden_size = 4;
  moe.shared_expert_gate = !llama;
  moe.router.score_function =
      llama ? schemas::RouterScoreFunction::softmax : schemas::RouterScoreFunction::sigmoid;
  moe.router.scaling_factor = llama ? 1.0 : 2.5;
  moe.capacity_factor = llama ? std::nullopt : std::optional<double>(1.0);
  return model;
}

struct MoeCase {
  ModelConfig model;
  ParameterStore store;
  MoeMlp mlp;
  MoeCase(ModelConfig config, std::uint32_t seed)
      : model(std::move(config)),
        store(moe_mlp_parameters(model, 1), ScalarType::float64),
        mlp(model, 1, store) {
    // Weights of std 0.5, so that routing is decided and capacity binds.
    store.values().copy_from(
        testing::random_tensor(store.values().shape(), ScalarType::float64, seed, 0.5));
  }
};

TEST(MoeMlp, GradientsMatchFiniteDifferences) {
  for (bool llama : {true, false}) {
    MoeCase c(small_moe_model(llama), llama ? 11 : 12);
    constexpr std::int64_t kTokens = 10;
    constexpr double kAuxiliaryScale = 0.8;
    const std::int64_t hidden = c.model.hidden_size;
    Tensor h = testing::random_tensor({kTokens, hidden}, ScalarType::float64, 21);
    const Tensor dy = testing::random_tensor({kTokens, hidden}, ScalarType::float64, 22);
    Tensor y = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
    MoeActivations a;
    auto objective = [&] {
      MoeActivations scratch;
      c.mlp.forward(h, y, scratch);
      return testing::weighted_sum(y, dy) +
             kAuxiliaryScale * (scratch.routing.load_balancing_loss + scratch.routing.z_loss);
    };
    c.mlp.forward(h, y, a);
    if (!llama) {
      // The capacity (⌈1 · 10 · 2 / 4⌉ = 5 pairs per expert) must drop something here, or the
      // dropping path goes untested.
      EXPECT_LT(a.routing.dispatched_count(), kTokens * 2);
    }
    Tensor dh = testing::random_tensor(h.shape(), ScalarType::float64, 23);  // overwritten
    c.store.zero_gradients();
    c.mlp.backward(dy, h, a, kAuxiliaryScale, dh);
    testing::expect_gradient_matches(h, dh, objective, llama ? "dh (llama)" : "dh (gpt)", 1e-5);
    const Tensor analytic = c.store.gradients().to(Device::cpu);
    testing::expect_gradient_matches(c.store.values(), analytic, objective,
                                     llama ? "parameters (llama)" : "parameters (gpt)", 1e-5);
  }
}

TEST(MoeMlp, ParametersAreStackedPerExpertAndSharedExpertsSideBySide) {
  const ModelConfig model = small_moe_model(false);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const ParameterSpec& spec : moe_mlp_parameters(model, 3)) {
    names.push_back(spec.name);
    shapes.push_back(spec.shape);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "layers.3.mlp.router.weight", "layers.3.mlp.experts.fc.weight",
                       "layers.3.mlp.experts.fc.bias", "layers.3.mlp.experts.output.weight",
                       "layers.3.mlp.experts.output.bias", "layers.3.mlp.shared.fc.weight",
                       "layers.3.mlp.shared.fc.bias", "layers.3.mlp.shared.output.weight",
                       "layers.3.mlp.shared.output.bias", "layers.3.mlp.shared_gate.weight"}));
  EXPECT_EQ(shapes[1], (Shape{4, 6, 8}));
  EXPECT_EQ(shapes[3], (Shape{4, 8, 6}));
  EXPECT_EQ(shapes[5], (Shape{8, 8}));  // 2 shared experts of width 4
  EXPECT_EQ(shapes[8], (Shape{2, 8}));  // each shared expert's own output bias
}

TEST(MoeMlp, AnExpertComputesOnlyTheTokensRoutedToIt) {
  // Zero one expert's output weights: the tokens it served lose exactly its weighted share.
  MoeCase c(small_moe_model(true), 31);
  constexpr std::int64_t kTokens = 10;
  const std::int64_t hidden = c.model.hidden_size;
  const Tensor h = testing::random_tensor({kTokens, hidden}, ScalarType::float64, 32);
  Tensor before = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
  Tensor after = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
  MoeActivations a;
  c.mlp.forward(h, before, a);
  ParameterEntry& output = c.store.entry("layers.1.mlp.experts.output.weight");
  const std::int64_t per_expert = output.value.numel() / 4;
  std::fill_n(output.value.data<double>() + 2 * per_expert, per_expert, 0.0);
  MoeActivations unused;
  c.mlp.forward(h, after, unused);
  int served_tokens = 0;
  for (std::int64_t t = 0; t < kTokens; ++t) {
    const auto* chosen = a.routing.expert.data() + t * 2;
    const bool served = chosen[0] == 2 || chosen[1] == 2;
    double change = 0;
    for (std::int64_t i = 0; i < hidden; ++i) {
      change +=
          std::abs(before.data<double>()[t * hidden + i] - after.data<double>()[t * hidden + i]);
    }
    EXPECT_EQ(change > 0, served) << "token " << t;
    served_tokens += served ? 1 : 0;
  }
  EXPECT_GT(served_tokens, 0);
}

}  // namespace
}  // namespace strata::executor
