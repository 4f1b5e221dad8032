// The one-rank backend: what a group of one computes, without MPI. Used by `strata train` started
// without a launcher and by groups that hold only this rank.
//
// A rank may send to itself, as MPI allows: a pipeline of one rank with virtual stages (pp 1,
// vpp 2) passes each micro-batch from its chunk 0 to its chunk 1 through its own pipeline group.
// Messages are matched by tag in the order sent (MPI's non-overtaking rule for one peer): a send
// completes at once, holding a copy until its receive is posted.
#include <deque>
#include <memory>

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
  CommunicationRequest send_async(const Tensor& values, int peer, int tag) override {
    STRATA_CHECK(peer == 0, "send to rank {} in a group of one", peer);
    for (auto pending = receives_.begin(); pending != receives_.end(); ++pending) {
      if ((*pending)->tag != tag) continue;
      deliver(values, **pending);
      receives_.erase(pending);
      return {};
    }
    Tensor held = Tensor::zeros(values.shape(), values.scalar_type(), values.device());
    held.copy_from(values);
    sent_.push_back(Message{tag, std::move(held)});
    return {};
  }
  CommunicationRequest receive_async(Tensor& values, int peer, int tag) override {
    STRATA_CHECK(peer == 0, "receive from rank {} in a group of one", peer);
    for (auto message = sent_.begin(); message != sent_.end(); ++message) {
      if (message->tag != tag) continue;
      Receive receive{tag, &values};
      deliver(message->values, receive);
      sent_.erase(message);
      return {};
    }
    // Posted before its send: completed by the send, which must come before the wait.
    auto receive = std::make_shared<Receive>(Receive{tag, &values});
    receives_.push_back(receive);
    return CommunicationRequest(
        [receive] {
          STRATA_CHECK(receive->done,
                       "waits for a message with tag {} that this rank never sent itself (a "
                       "group of one receives only what it sent)",
                       receive->tag);
        },
        [receive] { return receive->done; });
  }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SoloCommunicator>();
  }

 protected:
  void abort_job(int) override {}  // one process: abort() ends it

 private:
  struct Message {
    int tag = 0;
    Tensor values;
  };
  struct Receive {
    int tag = 0;
    Tensor* values = nullptr;
    bool done = false;
  };
  static void copy(const Tensor& from, Tensor& to) {
    if (from.raw() != to.raw()) to.copy_from(from);
  }
  static void deliver(const Tensor& from, Receive& receive) {
    STRATA_CHECK(from.numel() == receive.values->numel(),
                 "a message with tag {} of {} elements into a receive of {}", receive.tag,
                 from.numel(), receive.values->numel());
    copy(from, *receive.values);
    receive.done = true;
  }
  std::deque<Message> sent_;                       // sent, not yet received
  std::deque<std::shared_ptr<Receive>> receives_;  // posted, not yet sent
};

}  // namespace

std::unique_ptr<Communicator> solo_communicator() { return std::make_unique<SoloCommunicator>(); }

}  // namespace strata::executor
