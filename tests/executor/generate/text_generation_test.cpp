// Text generation: the logits it draws from are causal and shape-independent (a prefix's logits
// are the longer window's first rows, whatever forward ran before), and each draw follows the
// tempered, top-k-cut softmax.
#include "strata/executor/generate/text_generation.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "executor_models.h"

namespace strata::executor {
namespace {

Tensor token_row(const std::vector<std::int32_t>& tokens) {
  Tensor ids = Tensor::zeros({1, static_cast<std::int64_t>(tokens.size())}, ScalarType::int32);
  std::copy(tokens.begin(), tokens.end(), ids.data<std::int32_t>());
  return ids;
}

TEST(TextGeneration, APrefixsLogitsAreTheLongerWindowsFirstRows) {
  schemas::ModelConfig model = testing::micro_gpt(32, 0.2);  // dropout must not apply
  Transformer transformer(model, ScalarType::float32, 99);
  const std::vector<std::int32_t> window{3, 1, 4, 1, 5, 9, 2, 6};
  const Tensor whole = transformer.forward_logits(token_row(window));
  ASSERT_EQ(whole.shape(), Shape({8, 32}));
  // Shorter and longer windows in turn, so that buffers sized by one call serve another.
  for (std::int64_t length : {1, 5, 8, 3}) {
    const Tensor prefix = transformer.forward_logits(
        token_row(std::vector<std::int32_t>(window.begin(), window.begin() + length)));
    ASSERT_EQ(prefix.shape(), Shape({length, 32}));
    for (std::int64_t i = 0; i < prefix.numel(); ++i) {
      EXPECT_NEAR(prefix.data<float>()[i], whole.data<float>()[i], 1e-5)
          << "length " << length << " element " << i;
    }
  }
  // The same call twice: the same numbers (no dropout masks, no state).
  const Tensor again = transformer.forward_logits(token_row(window));
  for (std::int64_t i = 0; i < whole.numel(); ++i) {
    EXPECT_EQ(again.data<float>()[i], whole.data<float>()[i]);
  }
}

TEST(TextGeneration, DrawsFollowTheTemperedTopKSoftmax) {
  // Probabilities 1/2, 1/4, 1/4 (ids 1 and 2 tie), and a fourth token far below.
  const std::array<float, 4> logits{std::log(0.5f), std::log(0.25f), std::log(0.25f), -30.0f};
  const auto frequencies = [&](const GenerationOptions& options) {
    std::array<double, 4> counts{};
    constexpr int kDraws = 40000;
    for (int n = 0; n < kDraws; ++n) {
      counts[static_cast<std::size_t>(draw_token(logits.data(), 4, options, n))] += 1.0 / kDraws;
    }
    return counts;
  };
  // Four standard errors of a frequency near 1/2 over 40000 draws: 0.01.
  const std::array<double, 4> plain = frequencies({.tokens = 1, .temperature = 1, .top_k = 0});
  EXPECT_NEAR(plain[0], 0.5, 0.01);
  EXPECT_NEAR(plain[1], 0.25, 0.01);
  EXPECT_NEAR(plain[2], 0.25, 0.01);
  EXPECT_EQ(plain[3], 0.0);
  // Top 2: of the tied pair the lower id stays; renormalised to 2/3, 1/3.
  const std::array<double, 4> top2 = frequencies({.tokens = 1, .temperature = 1, .top_k = 2});
  EXPECT_NEAR(top2[0], 2.0 / 3.0, 0.01);
  EXPECT_NEAR(top2[1], 1.0 / 3.0, 0.01);
  EXPECT_EQ(top2[2], 0.0);
  // Temperature 2 flattens: weights √(1/2), √(1/4), √(1/4) → 0.414, 0.293, 0.293.
  const std::array<double, 4> hot = frequencies({.tokens = 1, .temperature = 2, .top_k = 3});
  EXPECT_NEAR(hot[0], 0.4142, 0.01);
  EXPECT_NEAR(hot[1], 0.2929, 0.01);
  // Temperature 0 and top-k 1: always the most likely, whatever the seed.
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    EXPECT_EQ(draw_token(logits.data(), 4, {.tokens = 1, .temperature = 0, .seed = seed}, 5), 0);
    EXPECT_EQ(
        draw_token(logits.data(), 4, {.tokens = 1, .temperature = 1, .top_k = 1, .seed = seed}, 5),
        0);
  }
}

TEST(TextGeneration, TheSameSeedGivesTheSameTokens) {
  Transformer transformer(testing::micro_gpt(32), ScalarType::float32, 7);
  const GenerationOptions options{.tokens = 12, .temperature = 1.0, .top_k = 0, .seed = 5};
  std::vector<std::int32_t> streamed;
  const std::vector<std::int32_t> first = generate_tokens(
      transformer, {1, 2, 3}, options, [&](std::int32_t token) { streamed.push_back(token); });
  EXPECT_EQ(first.size(), 12u);  // past max_seq_length 8: the window slides
  EXPECT_EQ(streamed, first);
  EXPECT_EQ(generate_tokens(transformer, {1, 2, 3}, options), first);
  GenerationOptions other = options;
  other.seed = 6;
  EXPECT_NE(generate_tokens(transformer, {1, 2, 3}, other), first);
}

}  // namespace
}  // namespace strata::executor
