// A job of N ranks in one process, for tests: each rank is a thread with its own Communicator,
// and the collectives meet in shared memory. Process groups, the sharded optimizer and the whole
// trainer run over it as over MPI — same interface, same call order — so they are tested without
// mpirun, under the sanitizers, and in a debugger.
//
// Reductions add the members' values in rank order, so every member gets the same bits. Sends are
// buffered (they complete at once) and a receive waits for its message. A rank whose body throws
// prints the message and aborts the process: its peers would otherwise wait for it forever.
#pragma once

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "strata/executor/distributed/communicator.h"

namespace strata::executor::testing {

class ThreadedCommunicator final : public Communicator {
 public:
  // What the members of one group share.
  struct Group {
    explicit Group(int members)
        : size(members),
          meeting(members),
          slots(static_cast<std::size_t>(members)),
          send_offsets(static_cast<std::size_t>(members)),
          splits(static_cast<std::size_t>(members)),
          split_groups(static_cast<std::size_t>(members)) {}
    int size;
    std::barrier<> meeting;
    std::vector<std::vector<char>> slots;  // each member's bytes for the collective in progress
    std::vector<std::vector<std::int64_t>> send_offsets;  // per member, for all_to_all
    std::vector<std::pair<int, int>> splits;              // (color, key) per member
    std::vector<std::shared_ptr<Group>> split_groups;
    // Point to point: (from, to, tag) → messages in order.
    std::mutex mail_guard;
    std::condition_variable mail_arrived;
    std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail;
  };

  ThreadedCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }
  std::string backend() const override { return "threads"; }

  void all_reduce(Tensor& values, ReduceOp op) override {
    post(values);
    switch (values.scalar_type()) {
      case ScalarType::float32:
        reduce_into<float>(values, op);
        break;
      case ScalarType::float64:
        reduce_into<double>(values, op);
        break;
      case ScalarType::int32:
        reduce_into<std::int32_t>(values, op);
        break;
      default:
        std::fprintf(stderr, "threaded all_reduce: unsupported type\n");
        std::abort();
    }
    group_->meeting.arrive_and_wait();
  }
  CommunicationRequest all_reduce_async(Tensor& values, ReduceOp op) override {
    all_reduce(values, op);
    return {};
  }
  void all_gather(const Tensor& part, Tensor& whole) override {
    post(part);
    for (int member = 0; member < size(); ++member) {
      const std::vector<char>& bytes = group_->slots[static_cast<std::size_t>(member)];
      std::memcpy(static_cast<char*>(whole.raw()) + member * bytes.size(), bytes.data(),
                  bytes.size());
    }
    group_->meeting.arrive_and_wait();
  }
  void reduce_scatter(const Tensor& whole, Tensor& part) override {
    post(whole);
    const std::size_t bytes = part.bytes();
    const auto slice = [&](int member) {
      return group_->slots[static_cast<std::size_t>(member)].data() +
             static_cast<std::size_t>(rank_) * bytes;
    };
    std::memcpy(part.raw(), slice(0), bytes);
    for (int member = 1; member < size(); ++member) {
      add(part, slice(member));
    }
    group_->meeting.arrive_and_wait();
  }
  void broadcast(Tensor& values, int root) override {
    post(values);
    std::memcpy(values.raw(), group_->slots[static_cast<std::size_t>(root)].data(), values.bytes());
    group_->meeting.arrive_and_wait();
  }
  void all_to_all(const Tensor& send, const std::vector<std::int64_t>& send_counts, Tensor& receive,
                  const std::vector<std::int64_t>& receive_counts) override {
    const AllToAllOffsets offsets =
        all_to_all_offsets(size(), send, send_counts, receive, receive_counts);
    group_->send_offsets[static_cast<std::size_t>(rank_)] = offsets.send;
    post(send);
    const std::size_t element = scalar_bytes(send.scalar_type());
    for (int member = 0; member < size(); ++member) {
      const auto from = static_cast<std::size_t>(member);
      const std::size_t at =
          static_cast<std::size_t>(group_->send_offsets[from][static_cast<std::size_t>(rank_)]);
      std::memcpy(static_cast<char*>(receive.raw()) +
                      static_cast<std::size_t>(offsets.receive[from]) * element,
                  group_->slots[from].data() + at * element,
                  static_cast<std::size_t>(receive_counts[from]) * element);
    }
    group_->meeting.arrive_and_wait();
  }
  CommunicationRequest send_async(const Tensor& values, int peer, int tag) override {
    std::vector<char> bytes(static_cast<const char*>(values.raw()),
                            static_cast<const char*>(values.raw()) + values.bytes());
    {
      const std::lock_guard<std::mutex> lock(group_->mail_guard);
      group_->mail[{rank_, peer, tag}].push_back(std::move(bytes));
    }
    group_->mail_arrived.notify_all();
    return {};
  }
  CommunicationRequest receive_async(Tensor& values, int peer, int tag) override {
    std::shared_ptr<Group> group = group_;
    const int rank = rank_;
    Tensor destination = values;
    return CommunicationRequest([group, rank, peer, tag, destination]() mutable {
      std::unique_lock<std::mutex> lock(group->mail_guard);
      auto& queue = group->mail[{peer, rank, tag}];
      group->mail_arrived.wait(lock, [&] { return !queue.empty(); });
      std::memcpy(destination.raw(), queue.front().data(), destination.bytes());
      queue.pop_front();
    });
  }
  void barrier() override { group_->meeting.arrive_and_wait(); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    group_->splits[static_cast<std::size_t>(rank_)] = {color, key};
    group_->meeting.arrive_and_wait();
    // The lowest member of each color makes its group; its members are ordered by (key, rank).
    std::vector<int> members;
    for (int member = 0; member < size(); ++member) {
      if (group_->splits[static_cast<std::size_t>(member)].first == color)
        members.push_back(member);
    }
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return group_->splits[static_cast<std::size_t>(a)].second <
             group_->splits[static_cast<std::size_t>(b)].second;
    });
    if (rank_ == *std::min_element(members.begin(), members.end())) {
      const auto made = std::make_shared<Group>(static_cast<int>(members.size()));
      for (int member : members) group_->split_groups[static_cast<std::size_t>(member)] = made;
    }
    group_->meeting.arrive_and_wait();
    std::shared_ptr<Group> mine = group_->split_groups[static_cast<std::size_t>(rank_)];
    const int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    group_->meeting.arrive_and_wait();  // the next split may overwrite the table
    return std::make_unique<ThreadedCommunicator>(std::move(mine), new_rank);
  }

 protected:
  void abort_job(int) override { std::abort(); }

 private:
  // Puts this member's bytes in its slot and waits until every member has.
  void post(const Tensor& values) {
    std::vector<char>& slot = group_->slots[static_cast<std::size_t>(rank_)];
    slot.assign(static_cast<const char*>(values.raw()),
                static_cast<const char*>(values.raw()) + values.bytes());
    group_->meeting.arrive_and_wait();
  }
  template <class T>
  void reduce_into(Tensor& values, ReduceOp op) {
    T* out = values.data<T>();
    const std::int64_t n = values.numel();
    std::memcpy(out, group_->slots[0].data(), values.bytes());
    for (int member = 1; member < size(); ++member) {
      const T* in =
          reinterpret_cast<const T*>(group_->slots[static_cast<std::size_t>(member)].data());
      for (std::int64_t i = 0; i < n; ++i) {
        out[i] = op == ReduceOp::sum   ? out[i] + in[i]
                 : op == ReduceOp::max ? std::max(out[i], in[i])
                                       : std::min(out[i], in[i]);
      }
    }
  }
  void add(Tensor& part, const char* bytes) {
    const std::int64_t n = part.numel();
    if (part.scalar_type() == ScalarType::float32) {
      const float* in = reinterpret_cast<const float*>(bytes);
      for (std::int64_t i = 0; i < n; ++i) part.data<float>()[i] += in[i];
    } else {
      const double* in = reinterpret_cast<const double*>(bytes);
      for (std::int64_t i = 0; i < n; ++i) part.data<double>()[i] += in[i];
    }
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

// Runs body(world) on `ranks` threads, each with its rank's communicator of one job, and waits
// for all of them.
inline void run_on_threads(int ranks, const std::function<void(Communicator& world)>& body) {
  const auto world = std::make_shared<ThreadedCommunicator::Group>(ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&body, world, rank] {
      ThreadedCommunicator communicator(world, rank);
      try {
        body(communicator);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %d of the threaded job failed: %s\n", rank, error.what());
        std::abort();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace strata::executor::testing
