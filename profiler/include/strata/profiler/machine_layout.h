// Which ranks of a job form a node: by default the ranks that share a host; --gpus-per-node N
// groups N consecutive ranks instead (two "nodes" on one machine, to measure a layout before the
// second machine exists). A cluster file describes nodes of equal size whose ranks are numbered
// node by node, so a job that cannot form them is refused with the counts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "strata/executor/distributed/communicator.h"

namespace strata::profiler {

struct MachineLayout {
  std::vector<std::string> hosts;  // distinct host names, in rank order of first appearance
  int nodes = 1;
  int ranks_per_node = 1;
  int node_of_rank(int rank) const { return rank / ranks_per_node; }
};

// Collective over `world`: every rank learns every rank's host name; `ranks_per_node` overrides
// the grouping by host (it must divide the world, and a node may not span hosts).
MachineLayout discover_machine_layout(executor::Communicator& world,
                                      std::optional<int> ranks_per_node = std::nullopt);

// The host name of this process.
std::string host_name();

}  // namespace strata::profiler
