#include "strata/executor/distributed/stall_watchdog.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

namespace strata::executor {
namespace {

using Clock = std::chrono::steady_clock;

// Shared by the communicating thread and the watchdog. Never destroyed: the watchdog thread may
// still look at it while the process exits.
struct WatchState {
  std::mutex guard;
  double timeout_s = 0;
  bool started = false;
  int world_rank = 0;
  std::string label;
  // The communication in progress, if any.
  bool blocked = false;
  Clock::time_point since;
  const char* operation = "";
  std::int64_t elements = 0;
  const std::string* group = nullptr;
};

WatchState& state() {
  static WatchState* watched = new WatchState();
  return *watched;
}

[[noreturn]] void end_stalled_job(const WatchState& watched, double waited_s) {
  const std::string line = fmt::format(
      "strata: rank {}: stalled: waited {:.0f} s in {} of {} elements with {}{}; one of them "
      "stopped or is stuck (--stall-timeout {:g} s)\n",
      watched.world_rank, waited_s, watched.operation, watched.elements,
      watched.group ? *watched.group : std::string("its peers"),
      watched.label.empty() ? "" : " during " + watched.label, watched.timeout_s);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::fflush(stdout);
  // Not MPI_Abort: only the communicating thread may call MPI. The launcher ends the job's
  // other processes when one exits without finalising.
  ::_exit(kStallExitCode);
}

// How much later than rank 0 each rank reports a stall. When one rank stops, every other rank
// ends up waiting for it and would time out within moments of the others, each printing its line.
// The watchdog cannot ask its peers (only the communicating thread may call MPI, and it is the
// one blocked), so the ranks take turns: rank r reports r turns after the timeout, and the first
// report ends the job (mpirun ends the other ranks when one exits without finalising) before the
// next rank's turn comes. The stopped rank never reports, so the job ends at most one turn late.
double report_turn_s(double timeout_s) { return std::clamp(timeout_s / 2, 1.0, 10.0); }

void watch() {
  WatchState& watched = state();
  Clock::time_point last_look = Clock::now();
  for (;;) {
    double period_s = 0.5;
    {
      const std::lock_guard<std::mutex> lock(watched.guard);
      if (watched.timeout_s > 0) period_s = std::min(0.5, watched.timeout_s / 4);
      const Clock::time_point now = Clock::now();
      // A look far later than its period means this process itself was frozen (SIGSTOP, a
      // suspended machine): the stopped rank, woken by the launcher's SIGCONT on its way out,
      // must not report its peers for the time it stood still. Its wait starts again now.
      if (std::chrono::duration<double>(now - last_look).count() > std::max(2.0, 4 * period_s)) {
        watched.since = now;
      }
      last_look = now;
      if (watched.blocked && watched.timeout_s > 0) {
        const double waited_s = std::chrono::duration<double>(Clock::now() - watched.since).count();
        const double turn_s = report_turn_s(watched.timeout_s) * watched.world_rank;
        if (waited_s > watched.timeout_s + turn_s) end_stalled_job(watched, waited_s);
      }
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(period_s));
  }
}

}  // namespace

void set_stall_timeout(double seconds) {
  WatchState& watched = state();
  const std::lock_guard<std::mutex> lock(watched.guard);
  watched.timeout_s = seconds;
  if (seconds > 0 && !watched.started) {
    watched.started = true;
    std::thread(watch).detach();
  }
}

double stall_timeout() {
  WatchState& watched = state();
  const std::lock_guard<std::mutex> lock(watched.guard);
  return watched.timeout_s;
}

void set_stall_world_rank(int rank) {
  WatchState& watched = state();
  const std::lock_guard<std::mutex> lock(watched.guard);
  watched.world_rank = rank;
}

StallContext::StallContext(std::string label) {
  WatchState& watched = state();
  const std::lock_guard<std::mutex> lock(watched.guard);
  previous_ = std::move(watched.label);
  watched.label = std::move(label);
}

StallContext::~StallContext() {
  WatchState& watched = state();
  const std::lock_guard<std::mutex> lock(watched.guard);
  watched.label = std::move(previous_);
}

BlockedCommunication::BlockedCommunication(const char* operation, std::int64_t elements,
                                           const std::string& group) {
  WatchState& watched = state();
  const std::lock_guard<std::mutex> lock(watched.guard);
  watched.blocked = true;
  watched.since = Clock::now();
  watched.operation = operation;
  watched.elements = elements;
  watched.group = &group;
}

BlockedCommunication::~BlockedCommunication() {
  WatchState& watched = state();
  const std::lock_guard<std::mutex> lock(watched.guard);
  watched.blocked = false;
  watched.group = nullptr;
}

}  // namespace strata::executor
