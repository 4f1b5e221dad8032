// What the communicator holds on each pipeline rank while a plan's collectives run (plan_costs.cpp
// adds it to each rank's memory).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "strata/schemas/cluster_config.h"

namespace strata::costmodels {

using schemas::CommunicatorOperation;

// The communicator's temporaries on each pipeline rank (zero without a measured ratio): what the
// data-parallel all-reduces hold until the step waits for them, plus the largest a blocking
// collective holds while it runs.
class CommunicatorTemporaries {
 public:
  CommunicatorTemporaries(const schemas::ClusterConfig& cluster, std::int64_t pipeline_ranks)
      : cluster_(cluster),
        held_until_step_(static_cast<std::size_t>(pipeline_ranks), 0.0),
        largest_transient_(static_cast<std::size_t>(pipeline_ranks), 0.0) {}
  void hold_until_step(std::size_t rank, CommunicatorOperation operation, double message_bytes) {
    held_until_step_[rank] += bytes(operation, message_bytes);
  }
  void while_running(std::size_t rank, CommunicatorOperation operation, double message_bytes) {
    largest_transient_[rank] = std::max(largest_transient_[rank], bytes(operation, message_bytes));
  }
  void while_running_on_every_rank(CommunicatorOperation operation, double message_bytes) {
    for (std::size_t rank = 0; rank < largest_transient_.size(); ++rank) {
      while_running(rank, operation, message_bytes);
    }
  }
  double on_rank(std::size_t rank) const {
    return held_until_step_[rank] + largest_transient_[rank];
  }

 private:
  double bytes(CommunicatorOperation operation, double message_bytes) const {
    return cluster_.communicator_temporary_ratio(operation) * message_bytes;
  }
  const schemas::ClusterConfig& cluster_;
  std::vector<double> held_until_step_, largest_transient_;
};

}  // namespace strata::costmodels
