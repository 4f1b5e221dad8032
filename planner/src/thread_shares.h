// The planner's one way to use its threads: `threads` workers each run work(share) on an
// interleaved share of a list (items share, share + threads, ...), while the calling thread waits
// and, when asked, reports progress; the first exception any worker threw is rethrown once all
// have finished (an internal error must reach the caller, not terminate the program). Because each
// share writes only its own slots and results are merged in index order, what comes out does not
// depend on the number of threads.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::planner {

// `report` (optional) is called on this thread about every 100 ms while the workers run, and
// once after they finished.
inline void run_thread_shares(unsigned threads, const std::function<void(unsigned share)>& work,
                              const std::function<void()>& report = {}) {
  std::exception_ptr failure;
  std::mutex failure_mutex;
  std::atomic<unsigned> running{threads};
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (unsigned share = 0; share < threads; ++share) {
    workers.emplace_back([&, share] {
      try {
        work(share);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
      running.fetch_sub(1);
    });
  }
  while (report && running.load() > 0) {
    report();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (std::thread& worker : workers) worker.join();
  if (failure) std::rethrow_exception(failure);
  if (report) report();
}

}  // namespace strata::planner
