// Rotary embedding and causal grouped-query attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

#include "strata/executor/ops/attention_sinks.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/ops/rotary.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::weighted_sum;

TEST(Rotary, TurnsEachRotateHalfPairByPositionTimesFrequency) {
  constexpr std::int64_t kHeads = 2, kHeadDim = 4, kSeq = 3, kWidth = 10;  // 2 columns left alone
  constexpr double kTheta = 10000;
  const Tensor original = random_tensor({1, kSeq, kWidth}, ScalarType::float64, 1);
  Tensor x = Tensor::zeros(original.shape(), ScalarType::float64);
  x.copy_from(original);
  rotary_forward(x, kHeads, kHeadDim, kTheta);
  const double* in = original.data<double>();
  const double* out = x.data<double>();
  for (std::int64_t t = 0; t < kSeq; ++t) {
    for (std::int64_t h = 0; h < kHeads; ++h) {
      for (std::int64_t i = 0; i < kHeadDim / 2; ++i) {
        const std::int64_t a = t * kWidth + h * kHeadDim + i;
        const std::int64_t b = a + kHeadDim / 2;
        const double angle = t * std::pow(kTheta, -2.0 * i / kHeadDim);
        const std::complex<double> turned =
            std::complex<double>(in[a], in[b]) * std::polar(1.0, angle);
        EXPECT_NEAR(out[a], turned.real(), 1e-14);
        EXPECT_NEAR(out[b], turned.imag(), 1e-14);
      }
    }
    EXPECT_EQ(out[t * kWidth + 8], in[t * kWidth + 8]);
    EXPECT_EQ(out[t * kWidth + 9], in[t * kWidth + 9]);
  }
}

TEST(Rotary, BackwardMatchesFiniteDifferences) {
  Tensor x0 = random_tensor({2, 3, 8}, ScalarType::float64, 1);
  const Tensor dy = random_tensor(x0.shape(), ScalarType::float64, 2);
  Tensor x = Tensor::zeros(x0.shape(), ScalarType::float64);
  Tensor dx = Tensor::zeros(x0.shape(), ScalarType::float64);
  dx.copy_from(dy);
  rotary_backward(dx, 2, 4, 500.0);
  expect_gradient_matches(
      x0, dx,
      [&] {
        x.copy_from(x0);
        rotary_forward(x, 2, 4, 500.0);
        return weighted_sum(x, dy);
      },
      "dx");
}

// Textbook attention in float64: full score matrix, explicit mask (causal, and the window's),
// softmax (with a head's sink logit among the scores when `sinks` is given), weighted sum.
std::vector<double> reference_attention(const Tensor& qkv, const AttentionShape& shape,
                                        const std::vector<double>& sinks = {}) {
  const std::int64_t batch = qkv.size(0), seq = qkv.size(1), d = shape.head_dim;
  const std::int64_t width = shape.qkv_width();
  std::vector<double> out(static_cast<std::size_t>(batch * seq * shape.output_width()));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < shape.num_heads; ++h) {
      const std::int64_t kv = h / (shape.num_heads / shape.num_kv_heads);
      for (std::int64_t i = 0; i < seq; ++i) {
        std::vector<double> scores(static_cast<std::size_t>(i + 1));
        const std::int64_t first_key =
            shape.window > 0 ? std::max<std::int64_t>(0, i - shape.window + 1) : 0;
        double largest = sinks.empty() ? -1e300 : sinks[static_cast<std::size_t>(h)];
        for (std::int64_t j = first_key; j <= i; ++j) {
          double dot = 0;
          for (std::int64_t c = 0; c < d; ++c) {
            dot += testing::element(qkv, (b * seq + i) * width + h * d + c) *
                   testing::element(qkv, (b * seq + j) * width + (shape.num_heads + kv) * d + c);
          }
          // ALiBi: a penalty growing with the distance, by the head's slope.
          scores[static_cast<std::size_t>(j)] =
              dot / std::sqrt(static_cast<double>(d)) -
              shape.position_slope(h) * static_cast<double>(i - j);
          largest = std::max(largest, scores[static_cast<std::size_t>(j)]);
        }
        double total = sinks.empty() ? 0 : std::exp(sinks[static_cast<std::size_t>(h)] - largest);
        for (std::int64_t j = first_key; j <= i; ++j) {
          double& score = scores[static_cast<std::size_t>(j)];
          total += (score = std::exp(score - largest));
        }
        for (std::int64_t c = 0; c < d; ++c) {
          double value = 0;
          for (std::int64_t j = first_key; j <= i; ++j) {
            value += scores[static_cast<std::size_t>(j)] / total *
                     testing::element(qkv, (b * seq + j) * width +
                                               (shape.num_heads + shape.num_kv_heads + kv) * d + c);
          }
          out[static_cast<std::size_t>((b * seq + i) * shape.output_width() + h * d + c)] = value;
        }
      }
    }
  }
  return out;
}

TEST(CausalAttention, ForwardMatchesTextbookAttentionAcrossQueryBlocks) {
  // 4 query heads sharing 2 kv heads; 130 positions cross two 64-query block boundaries.
  const AttentionShape shape{.num_heads = 4, .num_kv_heads = 2, .head_dim = 8};
  const Tensor qkv = random_tensor({2, 130, shape.qkv_width()}, ScalarType::float32, 1);
  Tensor out = Tensor::zeros({2, 130, shape.output_width()}, ScalarType::float32);
  Tensor lse = Tensor::zeros({2, 4, 130}, ScalarType::float32);
  causal_attention_forward(qkv, shape, out, lse);
  const std::vector<double> expected = reference_attention(qkv, shape);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(testing::element(out, static_cast<std::int64_t>(i)), expected[i], 1e-5) << i;
  }
}

TEST(CausalAttention, AlibiSlopesAreBloomsForPowersOfTwoAndOtherHeadCounts) {
  // 8 heads: 2^-1 … 2^-8. 6 heads: the 4 of a power of two (2^-2, 2^-4, 2^-6, 2^-8), then every
  // other slope of 8 heads (2^-1, 2^-3).
  for (std::int64_t h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(alibi_slope(h, 8), std::exp2(-(h + 1.0)));
  const std::vector<double> six{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  for (std::int64_t h = 0; h < 6; ++h) EXPECT_DOUBLE_EQ(alibi_slope(h, 6), six[h]) << h;
  // A tensor-parallel rank's heads keep their slopes in the whole model.
  const AttentionShape second_half{
      .num_heads = 3, .num_kv_heads = 1, .head_dim = 4, .alibi_heads = 6, .first_head = 3};
  EXPECT_DOUBLE_EQ(second_half.position_slope(1), six[4]);
}

TEST(CausalAttention, AlibiForwardMatchesTextbookAttentionAcrossQueryBlocks) {
  const AttentionShape shape{
      .num_heads = 6, .num_kv_heads = 2, .head_dim = 4, .alibi_heads = 12, .first_head = 6};
  const Tensor qkv = random_tensor({1, 130, shape.qkv_width()}, ScalarType::float64, 1);
  Tensor out = Tensor::zeros({1, 130, shape.output_width()}, ScalarType::float64);
  Tensor lse = Tensor::zeros({1, 6, 130}, ScalarType::float64);
  causal_attention_forward(qkv, shape, out, lse);
  const std::vector<double> expected = reference_attention(qkv, shape);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(testing::element(out, static_cast<std::int64_t>(i)), expected[i], 1e-12) << i;
  }
}

// dqkv from backward against central differences of Σ dout·attention(qkv), in float64.
void expect_attention_backward_matches(const AttentionShape& shape, std::int64_t seq,
                                       double scale) {
  Tensor qkv = random_tensor({2, seq, shape.qkv_width()}, ScalarType::float64, 1, scale);
  const Tensor dout = random_tensor({2, seq, shape.output_width()}, ScalarType::float64, 2);
  Tensor out = Tensor::zeros(dout.shape(), ScalarType::float64);
  Tensor lse = Tensor::zeros({2, shape.num_heads, seq}, ScalarType::float64);
  auto loss = [&] {
    causal_attention_forward(qkv, shape, out, lse);
    return weighted_sum(out, dout);
  };
  loss();
  Tensor dqkv = Tensor::zeros(qkv.shape(), ScalarType::float64);
  causal_attention_backward(dout, qkv, out, lse, shape, dqkv);
  expect_gradient_matches(qkv, dqkv, loss, "dqkv");
}

TEST(CausalAttention, BackwardMatchesFiniteDifferences) {
  expect_attention_backward_matches({.num_heads = 4, .num_kv_heads = 2, .head_dim = 3}, 5, 1.0);
}

TEST(CausalAttention, AlibiBackwardMatchesFiniteDifferences) {
  expect_attention_backward_matches(
      {.num_heads = 3, .num_kv_heads = 1, .head_dim = 3, .alibi_heads = 3, .first_head = 0}, 6,
      1.0);
}

TEST(CausalAttention, BackwardIsExactAcrossQueryBlocks) {
  // 70 positions: the second block of 64 queries sees keys of the first.
  expect_attention_backward_matches({.num_heads = 2, .num_kv_heads = 1, .head_dim = 2}, 70, 0.5);
}

TEST(CausalAttention, WindowForwardMatchesTextbookAttentionAcrossQueryBlocks) {
  // A window of 70 keys over 130 positions: the second block of 64 queries starts its keys past
  // the first position, and its rows' bands end at different keys; with ALiBi, distances as ever.
  for (const AttentionShape& shape :
       {AttentionShape{.num_heads = 4, .num_kv_heads = 2, .head_dim = 8, .window = 70},
        AttentionShape{.num_heads = 2,
        .num_kv_heads = 1,
        .head_dim = 4,
        .alibi_heads = 2,
        .first_head = 0,
        .window = 5}}) {
    const Tensor qkv = random_tensor({2, 130, shape.qkv_width()}, ScalarType::float64, 1);
    Tensor out = Tensor::zeros({2, 130, shape.output_width()}, ScalarType::float64);
    Tensor lse = Tensor::zeros({2, shape.num_heads, 130}, ScalarType::float64);
    causal_attention_forward(qkv, shape, out, lse);
    const std::vector<double> expected = reference_attention(qkv, shape);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(testing::element(out, static_cast<std::int64_t>(i)), expected[i], 1e-12) << i;
    }
  }
}

TEST(CausalAttention, WindowBackwardMatchesFiniteDifferences) {
  expect_attention_backward_matches({.num_heads = 4, .num_kv_heads = 2, .head_dim = 3, .window = 3},
                                    7, 1.0);
  expect_attention_backward_matches({.num_heads = 2, .num_kv_heads = 1, .head_dim = 2, .window = 9},
                                    70, 0.5);
}

TEST(AttentionSinks, MergedOutputIsTextbookAttentionWithASinkLogitPerHead) {
  const AttentionShape shape{.num_heads = 3, .num_kv_heads = 1, .head_dim = 4, .window = 4};
  const Tensor qkv = random_tensor({2, 9, shape.qkv_width()}, ScalarType::float64, 1);
  Tensor sinks = Tensor::zeros({3}, ScalarType::float64);
  const std::vector<double> logits{-1.0, 0.5, 3.0};  // the last takes most of every row
  for (int h = 0; h < 3; ++h) sinks.data<double>()[h] = logits[static_cast<std::size_t>(h)];
  Tensor out = Tensor::zeros({2, 9, shape.output_width()}, ScalarType::float64);
  Tensor lse = Tensor::zeros({2, 3, 9}, ScalarType::float64);
  causal_attention_forward(qkv, shape, out, lse);
  attention_sinks_forward(sinks, shape, out, lse);
  const std::vector<double> expected = reference_attention(qkv, shape, logits);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(testing::element(out, static_cast<std::int64_t>(i)), expected[i], 1e-12) << i;
  }
}

TEST(AttentionSinks, BackwardMatchesFiniteDifferencesOfQkvAndSinks) {
  const AttentionShape shape{.num_heads = 2, .num_kv_heads = 1, .head_dim = 3, .window = 4};
  Tensor qkv = random_tensor({2, 6, shape.qkv_width()}, ScalarType::float64, 1);
  Tensor sinks = random_tensor({2}, ScalarType::float64, 4);
  const Tensor dout = random_tensor({2, 6, shape.output_width()}, ScalarType::float64, 2);
  Tensor out = Tensor::zeros(dout.shape(), ScalarType::float64);
  Tensor lse = Tensor::zeros({2, 2, 6}, ScalarType::float64);
  auto loss = [&] {
    causal_attention_forward(qkv, shape, out, lse);
    attention_sinks_forward(sinks, shape, out, lse);
    return weighted_sum(out, dout);
  };
  loss();
  Tensor dqkv = Tensor::zeros(qkv.shape(), ScalarType::float64);
  Tensor dsinks = Tensor::zeros(sinks.shape(), ScalarType::float64);
  attention_sinks_backward(dout, out, lse, sinks, shape, dsinks);
  causal_attention_backward(dout, qkv, out, lse, shape, dqkv);
  expect_gradient_matches(qkv, dqkv, loss, "dqkv");
  expect_gradient_matches(sinks, dsinks, loss, "dsinks");
}

}  // namespace
}  // namespace strata::executor
