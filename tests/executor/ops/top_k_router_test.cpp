// The MoE router: top-k choice and weights, capacity dropping and the dispatch order, the
// auxiliary losses' values by hand, and the backward against finite differences.
#include "strata/executor/ops/top_k_router.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor_testing.h"

namespace strata::executor {
namespace {

using schemas::MoeConfig;
using schemas::RouterScoreFunction;

MoeConfig router_config(RouterScoreFunction score, bool normalize, double scaling) {
  MoeConfig moe;
  moe.num_experts = 4;
  moe.experts_per_token = 2;
  moe.expert_ffn_hidden_size = 8;
  moe.router.score_function = score;
  moe.router.normalize_top_k = normalize;
  moe.router.scaling_factor = scaling;
  moe.router.aux_loss_coefficient = 0.1;
  moe.router.z_loss_coefficient = 0.01;
  return moe;
}

Tensor logits_of(std::initializer_list<double> values, std::int64_t tokens) {
  Tensor logits = Tensor::zeros({tokens, 4}, ScalarType::float64);
  std::int64_t i = 0;
  for (double v : values) logits.data<double>()[i++] = v;
  return logits;
}

TEST(TopKRouter, ChoosesTheBestExpertsAndDropsWhatTheCapacityCannotTake) {
  // Expert 0 is every token's first choice; the second choices are 1, 2, 1.
  const Tensor logits = logits_of({3, 1, 0, -1,  //
                                   2, 0, 1, -2,  //
                                   4, 2, 1, 0},
                                  3);
  MoeConfig moe = router_config(RouterScoreFunction::softmax, true, 1.0);
  moe.capacity_factor = 1.0;  // ⌈1 · 3 tokens · 2 / 4⌉ = 2 pairs per expert
  TokenRouting routing;
  route_tokens(logits, moe, routing);
  EXPECT_EQ(routing.expert, (std::vector<std::int32_t>{0, 1, 0, 2, 0, 1}));
  // Token 2's pair with expert 0 is the third: dropped; its pair with expert 1 is kept.
  EXPECT_EQ(routing.kept, (std::vector<std::uint8_t>{1, 1, 1, 1, 0, 1}));
  EXPECT_EQ(routing.dispatched, (std::vector<std::int64_t>{0, 2, 1, 5, 3}));
  EXPECT_EQ(routing.expert_offsets, (std::vector<std::int64_t>{0, 2, 4, 5, 5}));
  EXPECT_EQ(routing.tokens_per_expert, (std::vector<std::int64_t>{3, 2, 1, 0}));
  EXPECT_EQ(routing.token_of(3), 2);
  // Normalised top-2 softmax weights: e^3 / (e^3 + e^1) for token 0's first slot.
  const double first = std::exp(3.0) / (std::exp(3.0) + std::exp(1.0));
  EXPECT_NEAR(routing.weights.data<double>()[0], first, 1e-12);
  EXPECT_NEAR(routing.weights.data<double>()[1], 1 - first, 1e-12);

  // Load balancing = α·E·Σ f_e·P_e with f = (3, 2, 1, 0)/6 and P the mean softmax row.
  double balance = 0, squared_lse = 0;
  const double share[4] = {3.0 / 6, 2.0 / 6, 1.0 / 6, 0};
  for (int e = 0; e < 4; ++e) {
    double mean = 0;
    for (int t = 0; t < 3; ++t) {
      double sum = 0;
      for (int j = 0; j < 4; ++j) sum += std::exp(logits.data<double>()[t * 4 + j]);
      mean += std::exp(logits.data<double>()[t * 4 + e]) / sum / 3;
      if (e == 0) squared_lse += std::log(sum) * std::log(sum) / 3;
    }
    balance += share[e] * mean;
  }
  EXPECT_NEAR(routing.load_balancing_loss, 0.1 * 4 * balance, 1e-12);
  EXPECT_NEAR(routing.z_loss, 0.01 * squared_lse, 1e-12);
}

TEST(TopKRouter, DroplessKeepsEveryPairAndSigmoidWeightsAreScaledScores) {
  const Tensor logits = logits_of({0.5, -1, 2, 0}, 1);
  MoeConfig moe = router_config(RouterScoreFunction::sigmoid, false, 2.5);
  TokenRouting routing;
  route_tokens(logits, moe, routing);
  EXPECT_EQ(routing.expert, (std::vector<std::int32_t>{2, 0}));
  EXPECT_EQ(routing.kept, (std::vector<std::uint8_t>{1, 1}));
  const auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  EXPECT_NEAR(routing.weights.data<double>()[0], 2.5 * sigmoid(2), 1e-12);
  EXPECT_NEAR(routing.weights.data<double>()[1], 2.5 * sigmoid(0.5), 1e-12);
}

TEST(TopKRouter, EqualScoresGoToTheLowerExpert) {
  const Tensor logits = logits_of({1, 2, 2, 2}, 1);
  TokenRouting routing;
  route_tokens(logits, router_config(RouterScoreFunction::softmax, true, 1.0), routing);
  EXPECT_EQ(routing.expert, (std::vector<std::int32_t>{1, 2}));
}

TEST(TopKRouter, AnExpertBiasSteersTheChoiceButNotTheWeights) {
  // Scores favour 2 then 0; a bias of +1 on expert 3 makes it the first choice, and its weight is
  // its own sigmoid score, not score + bias.
  const Tensor logits = logits_of({0.5, -1, 2, 0}, 1);
  MoeConfig moe = router_config(RouterScoreFunction::sigmoid, false, 1.0);
  moe.router.expert_bias = true;
  Tensor bias = Tensor::zeros({4}, ScalarType::float64);
  bias.data<double>()[3] = 1.0;
  TokenRouting routing;
  route_tokens(logits, moe, routing, &bias);
  EXPECT_EQ(routing.expert, (std::vector<std::int32_t>{3, 2}));
  const auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  EXPECT_NEAR(routing.weights.data<double>()[0], sigmoid(0), 1e-12);
  EXPECT_NEAR(routing.weights.data<double>()[1], sigmoid(2), 1e-12);
  EXPECT_THROW(route_tokens(logits, moe, routing), InvariantError) << "the bias left out";
}

TEST(TopKRouter, GroupLimitedRoutingChoosesWithinTheBestGroups) {
  // 8 experts in 4 groups of 2, each token within its best 2 groups, top-2: a group's key is its
  // best k / groups = 1 score. Group keys 0.9 (experts 0, 1), 0.8 (2, 3), 0.85 (4, 5), 0.1 (6, 7):
  // groups 0 and 2, so expert 3 (0.8) loses to expert 4 (0.85) and expert 1 (0.7) to neither.
  MoeConfig moe;
  moe.num_experts = 8;
  moe.experts_per_token = 2;
  moe.expert_ffn_hidden_size = 4;
  moe.router.score_function = RouterScoreFunction::sigmoid;
  moe.router.expert_groups = 4;
  moe.router.groups_per_token = 2;
  const std::vector<double> scores{0.9, 0.7, 0.2, 0.8, 0.85, 0.1, 0.1, 0.05};
  Tensor logits = Tensor::zeros({1, 8}, ScalarType::float64);
  for (std::size_t e = 0; e < scores.size(); ++e) {
    logits.data<double>()[e] = std::log(scores[e] / (1 - scores[e]));  // sigmoid⁻¹
  }
  TokenRouting routing;
  route_tokens(logits, moe, routing);
  EXPECT_EQ(routing.expert, (std::vector<std::int32_t>{0, 4}));
  // Group 2 weakened (its best 0.85 → 0.3): groups 0 and 1 win, and expert 3 (0.8) is second.
  logits.data<double>()[4] = std::log(0.3 / 0.7);
  route_tokens(logits, moe, routing);
  EXPECT_EQ(routing.expert, (std::vector<std::int32_t>{0, 3}));
  // One group for each token: only group 0's experts.
  moe.router.groups_per_token = 1;
  route_tokens(logits, moe, routing);
  EXPECT_EQ(routing.expert, (std::vector<std::int32_t>{0, 1}));
}

TEST(TopKRouter, TheBiasStepRaisesUnderloadedExpertsAndLowersOverloadedOnes) {
  // Loads 1, 3, 2, 2 around a mean of 2.
  EXPECT_EQ(expert_bias_step({1, 3, 2, 2}, 0.001), (std::vector<double>{0.001, -0.001, 0.0, 0.0}));
}

// Σ d_weights ⊙ weights + scale · (load balancing + z-loss) for the routing of `logits`.
double router_objective(const Tensor& logits, const MoeConfig& moe, const Tensor& d_weights,
                        double scale) {
  TokenRouting routing;
  route_tokens(logits, moe, routing);
  return testing::weighted_sum(routing.weights, d_weights) +
         scale * (routing.load_balancing_loss + routing.z_loss);
}

TEST(TopKRouter, BackwardMatchesFiniteDifferences) {
  for (RouterScoreFunction score : {RouterScoreFunction::softmax, RouterScoreFunction::sigmoid}) {
    for (bool normalize : {true, false}) {
      const MoeConfig moe = router_config(score, normalize, 1.7);
      constexpr std::int64_t kTokens = 6;
      Tensor logits = testing::random_tensor({kTokens, 4}, ScalarType::float64, 3, 1.5);
      const Tensor d_weights = testing::random_tensor({kTokens, 2}, ScalarType::float64, 4);
      constexpr double kScale = 0.7;
      TokenRouting routing;
      route_tokens(logits, moe, routing);
      Tensor d_logits = testing::random_tensor(logits.shape(), ScalarType::float64, 5);
      route_tokens_backward(logits, routing, moe, d_weights, kScale, d_logits);
      testing::expect_gradient_matches(
          logits, d_logits, [&] { return router_objective(logits, moe, d_weights, kScale); },
          normalize ? "d_logits (normalised)" : "d_logits");
    }
  }
}

}  // namespace
}  // namespace strata::executor
