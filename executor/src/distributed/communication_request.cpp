#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "strata/executor/distributed/communicator.h"

namespace strata::executor {
namespace {
// Communication is issued from one thread per rank (MPI_THREAD_FUNNELED): a total per thread,
// which is the process's under MPI and each rank's in a test that runs ranks as threads.
thread_local double blocked_seconds = 0;
}  // namespace

double communication_seconds() { return blocked_seconds; }

void record_communication_seconds(double seconds) { blocked_seconds += seconds; }

void Communicator::abort(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  abort_job(exit_code);
  std::_Exit(exit_code);
}

AllToAllOffsets all_to_all_offsets(int members, const Tensor& send,
                                   const std::vector<std::int64_t>& send_counts,
                                   const Tensor& receive,
                                   const std::vector<std::int64_t>& receive_counts) {
  const auto offsets_of = [members](const std::vector<std::int64_t>& counts, const Tensor& tensor,
                                    const char* side) {
    STRATA_CHECK(static_cast<int>(counts.size()) == members,
                 "all_to_all: {} {} counts for a group of {}", counts.size(), side, members);
    std::vector<std::int64_t> offsets;
    std::int64_t total = 0;
    for (std::int64_t count : counts) {
      STRATA_CHECK(count >= 0, "all_to_all: a {} count of {}", side, count);
      offsets.push_back(total);
      total += count;
    }
    STRATA_CHECK(total <= tensor.numel(), "all_to_all: {} counts add up to {}, the tensor holds {}",
                 side, total, tensor.numel());
    return offsets;
  };
  STRATA_CHECK(send.scalar_type() == receive.scalar_type(), "all_to_all: sends {}, receives {}",
               scalar_type_name(send.scalar_type()), scalar_type_name(receive.scalar_type()));
  return AllToAllOffsets{offsets_of(send_counts, send, "send"),
                         offsets_of(receive_counts, receive, "receive")};
}

CommunicationRequest::CommunicationRequest(CommunicationRequest&& other) noexcept
    : wait_(std::move(other.wait_)), test_(std::move(other.test_)) {
  other.wait_ = nullptr;
  other.test_ = nullptr;
}

CommunicationRequest& CommunicationRequest::operator=(CommunicationRequest&& other) noexcept {
  if (this != &other) {
    wait();
    wait_ = std::move(other.wait_);
    test_ = std::move(other.test_);
    other.wait_ = nullptr;
    other.test_ = nullptr;
  }
  return *this;
}

CommunicationRequest::~CommunicationRequest() { wait(); }

void CommunicationRequest::wait() {
  if (!wait_) return;
  std::function<void()> wait = std::move(wait_);
  wait_ = nullptr;
  test_ = nullptr;
  const auto started = std::chrono::steady_clock::now();
  wait();
  record_communication_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

bool CommunicationRequest::completed() {
  if (!wait_) return true;
  if (!test_ || test_()) {
    wait();  // completes (or releases) the request; immediate when the test said done
    return true;
  }
  return false;
}

}  // namespace strata::executor
