// Whether the communicator advances a non-blocking collective while its rank computes. Data
// parallelism issues each gradient bucket's all-reduce during the backward and waits for it
// before the optimizer step; that hides the all-reduce only if it makes progress meanwhile. NCCL's
// kernels run on their own SMs beside the compute; Open MPI on a rank without a progress thread
// moves a non-blocking collective only inside MPI calls, so the all-reduce runs when the step
// waits. The simulator reads the measured fraction (cluster communicator_progress_during_compute).
#pragma once

#include "strata/executor/distributed/communicator.h"
#include "strata/profiler/repeated_timing.h"

namespace strata::profiler {

struct ProgressMeasurement {
  Timing alone;           // issue, then wait at once: the collective's own time
  Timing wait_after;      // the wait that remains after computing for twice that long
  double fraction = 1.0;  // 1 − wait_after / alone, in [0, 1]: the share done during compute
};

// Collective over `group` (two ranks or more): a non-blocking all-reduce of `message_bytes`,
// `repeats` times each way; the medians are the largest over the members.
ProgressMeasurement measure_communicator_progress(executor::Communicator& group,
                                                  double message_bytes, int repeats);

}  // namespace strata::profiler
