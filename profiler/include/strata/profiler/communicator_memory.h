// What the communicator allocates for itself per byte of a message, held until the operation
// completes: Open MPI's non-blocking all-reduce copies its whole buffer, its blocking all-reduce
// half of it; NCCL allocates nothing per call. The simulator adds these temporaries to a rank's
// peak (the data-parallel all-reduces hold theirs until the step waits for them).
#pragma once

#include <map>
#include <optional>

#include "strata/executor/distributed/communicator.h"
#include "strata/schemas/cluster_config.h"

namespace strata::profiler {

// Collective over `group` (two ranks or more): for each operation in the form the executor
// issues it, the growth of the peak resident set while one operation on a message of
// `message_bytes` runs, divided by the message, the largest over the members. Nothing where
// the kernel does not let the peak be restarted (/proc/self/clear_refs).
std::optional<std::map<schemas::CommunicatorOperation, double>> measure_communicator_temporaries(
    executor::Communicator& group, double message_bytes);

}  // namespace strata::profiler
