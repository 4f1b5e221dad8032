// The label rules of multi-token prediction (executor/model/multi_token_prediction.h): the stacked
// labels roll the targets within each sequence, and the rows left unscored at a depth are the
// sequence's last positions wherever cp's chunk order puts them. The module's arithmetic is held
// to PyTorch by tests/reference/torch_reference.py (mtp-features and DeepSeek-V3's tiny copy).
#include "strata/executor/model/multi_token_prediction.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "threaded_communicator.h"

namespace strata::executor {
namespace {

TEST(MultiTokenPrediction, LabelsRollTheTargetsWithinEachSequence) {
  Tensor targets = Tensor::zeros({2, 4}, ScalarType::int32);
  for (std::int32_t i = 0; i < 8; ++i) targets.data<std::int32_t>()[i] = 10 + i;
  Tensor labels = Tensor::zeros({3 * 2, 4}, ScalarType::int32);
  stack_future_labels(targets, 2, labels);
  const std::vector<std::int32_t> expected = {
      10, 11, 12, 13, 14, 15, 16, 17,  // depth 0: the targets
      11, 12, 13, 0,  15, 16, 17, 0,   // depth 1: one ahead, nothing rolls over from sequence 1
      12, 13, 0,  0,  16, 17, 0,  0};  // depth 2
  const std::vector<std::int32_t> got(labels.data<std::int32_t>(),
                                      labels.data<std::int32_t>() + labels.numel());
  EXPECT_EQ(got, expected);
}

TEST(MultiTokenPrediction, UnlabelledRowsAreTheLastPositionsOnOneRank) {
  const ContextParallelism one;
  const std::vector<RowRange> rows = unlabelled_rows(one, 2, 8, 3);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].row, 5);
  EXPECT_EQ(rows[0].count, 3);
  EXPECT_EQ(rows[1].row, 13);
  EXPECT_EQ(rows[1].count, 3);
  EXPECT_TRUE(unlabelled_rows(one, 2, 8, 0).empty()) << "the main model scores every position";
}

// Under cp 2 a sequence of 16 is 4 chunks of 4; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and
// 2. Depth 5 leaves positions 11..15 unscored: rank 1's chunk 2 ends at 11, rank 0's chunk 3 is
// 12..15 — each rank finds exactly its rows among them.
TEST(MultiTokenPrediction, UnlabelledRowsFollowTheContextParallelChunks) {
  std::vector<std::set<std::int64_t>> positions(2);
  testing::run_on_threads(2, [&](Communicator& world) {
    ContextParallelism cp;
    cp.group = &world;
    std::set<std::int64_t>& mine = positions[static_cast<std::size_t>(world.rank())];
    for (const RowRange& range : unlabelled_rows(cp, 1, 8, 5)) {
      for (std::int64_t row = range.row; row < range.row + range.count; ++row) {
        mine.insert(cp.position(row, 8));
      }
    }
  });
  EXPECT_EQ(positions[0], (std::set<std::int64_t>{12, 13, 14, 15}));
  EXPECT_EQ(positions[1], (std::set<std::int64_t>{11}));
}

}  // namespace
}  // namespace strata::executor
