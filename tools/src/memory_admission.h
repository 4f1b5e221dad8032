// Admission of a training job's memory before the first allocation: each rank's predicted peak
// (the simulator's memory model for the plan: weights, gradients, optimizer state, activations of
// the plan's schedule, the communicator's temporaries) against what it will be allocated from.
// On the CPU that is the host: the peak plus what the process already holds, summed over the
// ranks that share the host, against the memory it has available (MemAvailable, or the cgroup's
// limit less its use where that is lower). On a GPU it is the device: the peak against what the
// driver can still give (cudaMemGetInfo's free memory, after the CUDA context and any other
// process). A job that would not fit is refused with the numbers and the plan fields to change,
// not started to allocate until the kernel kills it or the device runs out mid-step.
#pragma once

#include <string>

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

// Throws schemas::InputError("--memory-check", ...) when `rank`'s predicted peak is above
// `free_bytes` of the device `device_name`, which has `total_bytes` in all.
void check_device_memory(const simulator::RankMemory& rank, double free_bytes, double total_bytes,
                         const std::string& device_name);

// check_device_memory against this process's GPU as the driver reports it now.
void check_gpu_memory(const simulator::RankMemory& rank);

}  // namespace strata::tools
