// Admission of a CPU training job's memory before the first allocation: each rank's predicted
// peak (the simulator's memory model for the plan: weights, gradients, optimizer state,
// activations of the plan's schedule, the communicator's temporaries) plus what its process
// already holds, summed over the ranks that share its host, against the memory the host has
// available (MemAvailable, or the cgroup's limit less its use where that is lower). A job that
// would not fit is refused with the numbers and the plan fields to change, not started to
// allocate until the kernel kills it.
#pragma once

#include "strata/executor/distributed/communicator.h"
#include "strata/simulator/simulation.h"

namespace strata::tools {

struct AvailableMemory {
  double bytes = 0;
  const char* source = "";  // "MemAvailable" or "the cgroup's memory.max"
};

// What this host can still give, read now.
AvailableMemory available_host_memory();

// Collective over `world`: every rank gives its own predicted peak `rank` (the simulator's
// RankMemory for its pipeline stage, or the largest); throws schemas::InputError("--memory-check",
// ...) on every rank of a host whose ranks together need more than it has.
void check_host_memory(const simulator::RankMemory& rank, executor::Communicator& world);

}  // namespace strata::tools
