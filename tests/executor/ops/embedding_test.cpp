#include "strata/executor/ops/embedding.h"

#include <gtest/gtest.h>

#include "strata/executor/ops/position_embedding.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::weighted_sum;

TEST(Embedding, ForwardCopiesRowsAndBackwardAddsRepeatedTokens) {
  const Tensor ids = testing::int32_tensor({2, 0, 2});
  Tensor table = random_tensor({3, 4}, ScalarType::float64, 1);
  Tensor out = Tensor::zeros({3, 4}, ScalarType::float64);
  embedding_forward(ids, table, out);
  for (std::int64_t c = 0; c < 4; ++c) {
    EXPECT_EQ(out.data<double>()[c], table.data<double>()[2 * 4 + c]);
    EXPECT_EQ(out.data<double>()[4 + c], table.data<double>()[c]);
  }
  const Tensor dout = random_tensor({3, 4}, ScalarType::float64, 2);
  Tensor dtable = Tensor::zeros(table.shape(), ScalarType::float64);
  embedding_backward(ids, dout, dtable);
  expect_gradient_matches(
      table, dtable,
      [&] {
        embedding_forward(ids, table, out);
        return weighted_sum(out, dout);
      },
      "dtable");
}

TEST(Embedding, TokenOutsideTheVocabularyIsRefused) {
  const Tensor ids = testing::int32_tensor({3});
  const Tensor table = random_tensor({3, 4}, ScalarType::float32, 1);
  Tensor out = Tensor::zeros({1, 4}, ScalarType::float32);
  EXPECT_THROW(embedding_forward(ids, table, out), InvariantError);
}

TEST(PositionEmbedding, AddsRowTAtPositionTAndBackwardSumsOverBatch) {
  Tensor table = random_tensor({5, 3}, ScalarType::float64, 1);
  const Tensor x0 = random_tensor({2, 4, 3}, ScalarType::float64, 2);
  Tensor x = Tensor::zeros(x0.shape(), ScalarType::float64);
  x.copy_from(x0);
  position_embedding_forward(table, x);
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t t = 0; t < 4; ++t) {
      for (std::int64_t c = 0; c < 3; ++c) {
        const std::int64_t i = (b * 4 + t) * 3 + c;
        EXPECT_DOUBLE_EQ(x.data<double>()[i],
                         x0.data<double>()[i] + table.data<double>()[t * 3 + c]);
      }
    }
  }
  const Tensor dx = random_tensor(x.shape(), ScalarType::float64, 3);
  Tensor dtable = Tensor::zeros(table.shape(), ScalarType::float64);
  position_embedding_backward(dx, dtable);
  expect_gradient_matches(
      table, dtable,
      [&] {
        x.copy_from(x0);
        position_embedding_forward(table, x);
        return weighted_sum(x, dx);
      },
      "dtable");
}

}  // namespace
}  // namespace strata::executor
