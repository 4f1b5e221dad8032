// The one-rank backend: what a group of one computes, without MPI. Used by `strata train` started
// without a launcher and by groups that hold only this rank.
#include "strata/executor/distributed/communicator.h"

namespace strata::executor {
namespace {

class SoloCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "solo"; }

  void all_reduce(Tensor&, ReduceOp) override {}
  CommunicationRequest all_reduce_async(Tensor&, ReduceOp) override { return {}; }
  void all_gather(const Tensor& part, Tensor& whole) override { copy(part, whole); }
  void reduce_scatter(const Tensor& whole, Tensor& part) override { copy(whole, part); }
  void broadcast(Tensor&, int root) override {
    STRATA_CHECK(root == 0, "broadcast from rank {} in a group of one", root);
  }
  void all_to_all(const Tensor& send, const std::vector<std::int64_t>& send_counts, Tensor& receive,
                  const std::vector<std::int64_t>& receive_counts) override {
    all_to_all_offsets(1, send, send_counts, receive, receive_counts);
    STRATA_CHECK(send_counts[0] == receive_counts[0],
                 "all_to_all: sends itself {} elements and receives {}", send_counts[0],
                 receive_counts[0]);
    if (send_counts[0] == 0 || send.raw() == receive.raw()) return;
    receive.view(0, {send_counts[0]}).copy_from(send.view(0, {send_counts[0]}));
  }
  CommunicationRequest send_async(const Tensor&, int peer, int) override {
    STRATA_CHECK(false, "send to rank {} in a group of one", peer);
    return {};
  }
  CommunicationRequest receive_async(Tensor&, int peer, int) override {
    STRATA_CHECK(false, "receive from rank {} in a group of one", peer);
    return {};
  }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SoloCommunicator>();
  }

 protected:
  void abort_job(int) override {}  // one process: abort() ends it

 private:
  static void copy(const Tensor& from, Tensor& to) {
    if (from.raw() != to.raw()) to.copy_from(from);
  }
};

}  // namespace

std::unique_ptr<Communicator> solo_communicator() { return std::make_unique<SoloCommunicator>(); }

}  // namespace strata::executor
