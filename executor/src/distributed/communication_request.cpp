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
