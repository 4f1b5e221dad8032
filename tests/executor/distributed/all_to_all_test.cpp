// Communicator::all_to_all on the one-rank backend and on the threaded test backend (the MPI one
// is tested under mpirun in parallel_training_test.cpp): blocks reach their members in rank order,
// empty blocks are allowed, and arguments that do not add up stop with the reason.
#include <gtest/gtest.h>

#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "threaded_communicator.h"

namespace strata::executor {
namespace {

TEST(AllToAll, OneRankCopiesItsOwnBlock) {
  std::unique_ptr<Communicator> solo = solo_communicator();
  Tensor send = Tensor::zeros({3}, ScalarType::float64);
  for (int i = 0; i < 3; ++i) send.data<double>()[i] = i + 0.5;
  Tensor receive = Tensor::zeros({4}, ScalarType::float64);
  solo->all_to_all(send, {3}, receive, {3});
  EXPECT_EQ(receive.data<double>()[2], 2.5);
  EXPECT_EQ(receive.data<double>()[3], 0.0);
  EXPECT_THROW(solo->all_to_all(send, {3}, receive, {2}), std::exception);
  EXPECT_THROW(solo->all_to_all(send, {4}, receive, {4}), std::exception);  // send holds 3
  EXPECT_THROW(solo->all_to_all(send, {3, 0}, receive, {3, 0}), std::exception);
}

TEST(AllToAll, ThreeThreadedRanksExchangeUnevenBlocks) {
  // Member i sends member j (i·3 + j) % 4 elements valued 100·i + 10·j + k: some blocks are empty.
  const auto count = [](int from, int to) -> std::int64_t { return (from * 3 + to) % 4; };
  testing::run_on_threads(3, [&](Communicator& world) {
    const int me = world.rank();
    std::vector<std::int64_t> send_counts, receive_counts;
    std::vector<double> values;
    for (int peer = 0; peer < 3; ++peer) {
      send_counts.push_back(count(me, peer));
      receive_counts.push_back(count(peer, me));
      for (std::int64_t k = 0; k < count(me, peer); ++k) values.push_back(100 * me + 10 * peer + k);
    }
    Tensor send =
        Tensor::zeros({static_cast<std::int64_t>(values.size()) + 1}, ScalarType::float64);
    std::copy(values.begin(), values.end(), send.data<double>());
    Tensor receive = Tensor::zeros({12}, ScalarType::float64);
    world.all_to_all(send, send_counts, receive, receive_counts);
    std::int64_t at = 0;
    for (int from = 0; from < 3; ++from) {
      for (std::int64_t k = 0; k < count(from, me); ++k) {
        EXPECT_EQ(receive.data<double>()[at++], 100 * from + 10 * me + k)
            << "rank " << me << " from " << from;
      }
    }
  });
}

}  // namespace
}  // namespace strata::executor
