// Both ways of context-parallel attention (ring and all-gather) and the context-parallel token map
// against one device: each cp rank (a thread over threaded_communicator.h) holds its two chunks of
// every sequence, and its output, log-sum-exps and gradients must be those rows of causal
// attention over the whole sequence.
#include "strata/executor/model/ring_attention.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <vector>

#include "strata/executor/model/all_gather_attention.h"
#include "strata/executor/model/context_parallel.h"
#include "strata/executor/ops/causal_attention.h"
#include "tensor_testing.h"
#include "threaded_communicator.h"

namespace strata::executor {
namespace {

using testing::random_tensor;
using testing::run_on_threads;

// Rows of a [batch, seq, width] tensor at this cp rank's positions: [batch, seq / cp, width].
Tensor local_rows(const ContextParallelism& cp, const Tensor& whole) {
  const std::int64_t batch = whole.size(0);
  const std::int64_t local_seq = whole.size(1) / cp.size();
  const std::int64_t width = whole.size(2);
  Tensor local = Tensor::zeros({batch, local_seq, width}, whole.scalar_type());
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t j = 0; j < local_seq; ++j) {
      const std::int64_t t = cp.position(j, local_seq);
      local.view((b * local_seq + j) * width, {width})
          .copy_from(whole.view((b * whole.size(1) + t) * width, {width}));
    }
  }
  return local;
}

// lse [batch, heads, seq] at this rank's positions.
Tensor local_statistics(const ContextParallelism& cp, const Tensor& whole) {
  const std::int64_t seq = whole.size(2);
  const std::int64_t local_seq = seq / cp.size();
  Tensor local = Tensor::zeros({whole.size(0), whole.size(1), local_seq}, whole.scalar_type());
  for (std::int64_t row = 0; row < whole.size(0) * whole.size(1); ++row) {
    for (std::int64_t j = 0; j < local_seq; ++j) {
      local.data<double>()[row * local_seq + j] =
          whole.data<double>()[row * seq + cp.position(j, local_seq)];
    }
  }
  return local;
}

double largest_difference(const Tensor& a, const Tensor& b) {
  double largest = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    largest = std::max(largest, std::abs(a.data<double>()[i] - b.data<double>()[i]));
  }
  return largest;
}

struct Case {
  std::int64_t ranks, batch, seq;
  AttentionShape shape;
};

// Runs `forward` twice (the buffers are reused from one call to the next, as layers reuse them)
// and `backward` once on every cp rank, for every case, and checks each rank's rows of the output,
// log-sum-exps and gradients against one device's causal attention.
template <class Buffers, class Forward, class Backward>
void expect_each_rank_gets_its_rows(Forward&& forward, Backward&& backward) {
  // MHA and GQA, chunks of one token and of many (more than one query piece of 64); ALiBi
  // (a tensor-parallel rank's heads 6..11 of 12), whose distances span the chunks; sliding
  // windows that cut blocks in part and leave others unseen (with ALiBi too), and one longer
  // than a chunk.
  for (const Case& c :
       {Case{2, 2, 8, {4, 4, 3}}, Case{3, 1, 12, {4, 2, 5}}, Case{4, 2, 8, {6, 2, 4}},
        Case{2, 1, 264, {2, 1, 4}}, Case{2, 2, 8, {6, 2, 4, 12, 6}},
        Case{2, 1, 264, {2, 1, 4, 2, 0}}, Case{4, 2, 16, {4, 2, 3, 0, 0, 3}},
        Case{2, 2, 8, {6, 2, 4, 12, 6, 2}}, Case{2, 1, 264, {2, 1, 4, 2, 0, 70}}}) {
    SCOPED_TRACE(::testing::Message()
                 << "cp " << c.ranks << ", seq " << c.seq << ", " << c.shape.num_heads << "/"
                 << c.shape.num_kv_heads << " heads");
    const Tensor qkv =
        random_tensor({c.batch, c.seq, c.shape.qkv_width()}, ScalarType::float64, 11);
    const Tensor dout =
        random_tensor({c.batch, c.seq, c.shape.output_width()}, ScalarType::float64, 12);
    Tensor out = Tensor::zeros(dout.shape(), ScalarType::float64);
    Tensor lse = Tensor::zeros({c.batch, c.shape.num_heads, c.seq}, ScalarType::float64);
    causal_attention_forward(qkv, c.shape, out, lse);
    Tensor dqkv = Tensor::zeros(qkv.shape(), ScalarType::float64);
    causal_attention_backward(dout, qkv, out, lse, c.shape, dqkv);

    std::mutex guard;
    std::vector<double> differences;
    run_on_threads(static_cast<int>(c.ranks), [&](Communicator& group) {
      const ContextParallelism cp{&group};
      const Tensor local_qkv = local_rows(cp, qkv);
      Tensor local_out = Tensor::zeros(local_rows(cp, out).shape(), ScalarType::float64);
      Tensor local_lse =
          Tensor::zeros({c.batch, c.shape.num_heads, c.seq / c.ranks}, ScalarType::float64);
      Buffers buffers;
      for (int pass = 0; pass < 2; ++pass) {
        forward(cp, local_qkv, c.shape, local_out, local_lse, buffers);
      }
      Tensor local_dqkv = Tensor::zeros(local_qkv.shape(), ScalarType::float64);
      backward(cp, local_rows(cp, dout), local_qkv, local_out, local_lse, c.shape, local_dqkv,
               buffers);
      const std::lock_guard<std::mutex> lock(guard);
      differences.push_back(largest_difference(local_out, local_rows(cp, out)));
      differences.push_back(largest_difference(local_lse, local_statistics(cp, lse)));
      differences.push_back(largest_difference(local_dqkv, local_rows(cp, dqkv)));
    });
    ASSERT_EQ(differences.size(), static_cast<std::size_t>(3 * c.ranks));
    for (double difference : differences) EXPECT_LT(difference, 1e-12);
  }
}

TEST(RingAttention, EachRankGetsItsRowsOfOneDevicesCausalAttention) {
  expect_each_rank_gets_its_rows<RingAttentionBuffers>(
      [](auto&&... arguments) { ring_attention_forward(arguments...); },
      [](auto&&... arguments) { ring_attention_backward(arguments...); });
}

TEST(AllGatherAttention, EachRankGetsItsRowsOfOneDevicesCausalAttention) {
  expect_each_rank_gets_its_rows<AllGatherAttentionBuffers>(
      [](auto&&... arguments) { all_gather_attention_forward(arguments...); },
      [](auto&&... arguments) { all_gather_attention_backward(arguments...); });
}

// A sliding window leaves out the blocks whose nearest query and key are a window or more apart.
TEST(ContextParallelism, WindowsSkipTheBlocksNoQueryReaches) {
  // cp 4, local sequences of 4 (chunks of 2): rank 3 holds chunks 3 and 4, rank 0 chunks 0 and 7.
  EXPECT_EQ(visible_attention_blocks(4, 3, 4, 0).size(), 2u) << "chunk 0 before both";
  EXPECT_EQ(visible_attention_blocks(4, 3, 4, 0, 2).size(), 0u) << "5 and 7 positions apart";
  // Against its own chunks: the two diagonals always, and chunk 4 against chunk 3 (adjacent:
  // nearest 1 apart) unless a query sees itself alone.
  EXPECT_EQ(visible_attention_blocks(4, 3, 4, 3, 2).size(), 3u);
  EXPECT_EQ(visible_attention_blocks(4, 3, 4, 3, 1).size(), 2u);
  // Rank 0's chunk 7 against rank 2's chunk 5: nearest 3 apart.
  EXPECT_EQ(visible_attention_blocks(4, 0, 4, 2, 3).size(), 0u);
  EXPECT_EQ(visible_attention_blocks(4, 0, 4, 2, 4).size(), 1u);
}

TEST(ContextParallelism, RanksHoldChunksRAnd2cpMinus1MinusRAsRunsOfTokens) {
  // cp 2 of a sequence of 8: chunks of 2; rank 0 holds positions 0 1 6 7, rank 1 2 3 4 5.
  run_on_threads(2, [&](Communicator& group) {
    const ContextParallelism cp{&group};
    std::vector<std::int64_t> positions;
    for (std::int64_t j = 0; j < 4; ++j) positions.push_back(cp.position(j, 4));
    EXPECT_EQ(positions, cp.rank() == 0 ? (std::vector<std::int64_t>{0, 1, 6, 7})
                                        : (std::vector<std::int64_t>{2, 3, 4, 5}));
    // Rows 1..6 of two local sequences of 4 (a sequence-parallel rank's share): runs end at
    // every chunk, and tokens count the whole sequences before them.
    const std::vector<TokenRun> runs = cp.token_runs(1, 6, 4);
    std::vector<std::vector<std::int64_t>> seen;
    for (const TokenRun& run : runs) seen.push_back({run.row, run.count, run.token, run.position});
    const std::vector<std::vector<std::int64_t>> rank0{
        {0, 1, 1, 1}, {1, 2, 6, 6}, {3, 2, 8, 0}, {5, 1, 14, 6}};
    const std::vector<std::vector<std::int64_t>> rank1{
        {0, 1, 3, 3}, {1, 2, 4, 4}, {3, 2, 10, 2}, {5, 1, 12, 4}};
    EXPECT_EQ(seen, cp.rank() == 0 ? rank0 : rank1);
  });
  // Every position of every sequence is held by exactly one of cp 4's ranks.
  std::mutex guard;
  std::multiset<std::int64_t> held;
  run_on_threads(4, [&](Communicator& group) {
    const ContextParallelism cp{&group};
    const std::lock_guard<std::mutex> lock(guard);
    for (std::int64_t j = 0; j < 6; ++j) held.insert(cp.position(j, 6));
  });
  std::multiset<std::int64_t> expected;
  for (std::int64_t t = 0; t < 24; ++t) expected.insert(t);
  EXPECT_EQ(held, expected);
}

}  // namespace
}  // namespace strata::executor
