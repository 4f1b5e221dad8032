// The stall watchdog. A rank that stops without dying — SIGSTOP, a stuck device, a node the MPI
// runtime does not notice leaving — leaves every other rank blocked in its next collective or
// receive forever. With a stall timeout set, a rank blocked in one communication longer than it
// ends the job with one line: what it waited in (the operation, its size, the world ranks it
// waited with), for how long, and what it was doing (the step and schedule action), as PyTorch's
// NCCL watchdog does. The line names the ranks that were waited for; the rank that stopped is
// among them and is the one that did not print.
//
// A thread of its own looks twice a second at the one communication the process is blocked in
// (communication is issued from one thread, MPI_THREAD_FUNNELED) and, past the timeout, writes
// the line and ends the process; the launcher then ends the job's other processes. The waiting
// ranks take turns (rank r reports r × max(1 s, min(timeout / 2, 10 s)) after the timeout), so
// that the first report ends the job before any other rank prints a second line.
#pragma once

#include <cstdint>
#include <string>

namespace strata::executor {

// Seconds one blocking communication may last before the job is ended; 0 (the default): no
// limit. Starts the watchdog thread on the first positive value.
void set_stall_timeout(double seconds);
double stall_timeout();

// This process's rank in the job, for the message (set by the MPI backend).
void set_stall_world_rank(int rank);

// What this rank is doing, named in a stall's message ("step 4, action 1RECV_F3"); the previous
// label comes back when it ends.
class StallContext {
 public:
  explicit StallContext(std::string label);
  ~StallContext();
  StallContext(const StallContext&) = delete;
  StallContext& operator=(const StallContext&) = delete;

 private:
  std::string previous_;
};

// One blocking communication, registered with the watchdog from construction to destruction
// (used by the communicator backends). `operation` is a literal ("all_reduce", "receive");
// `group` names the world ranks taking part ("world ranks 0-3", "world rank 1") and outlives
// the object.
class BlockedCommunication {
 public:
  BlockedCommunication(const char* operation, std::int64_t elements, const std::string& group);
  ~BlockedCommunication();
  BlockedCommunication(const BlockedCommunication&) = delete;
  BlockedCommunication& operator=(const BlockedCommunication&) = delete;
};

// The process exit status after a stall.
inline constexpr int kStallExitCode = 1;

}  // namespace strata::executor
