#include "strata/profiler/machine_layout.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "strata/schemas/input_error.h"

namespace strata::profiler {
namespace {

constexpr std::int64_t kHostNameBytes = 256;

// Every rank's host name, in rank order.
std::vector<std::string> host_of_every_rank(executor::Communicator& world) {
  // Names travel as fixed-width int32 blocks: the communicator moves tensors.
  const std::string own = host_name();
  constexpr std::int64_t words = kHostNameBytes / 4;
  executor::Tensor mine = executor::Tensor::zeros({words}, executor::ScalarType::int32);
  std::memcpy(mine.raw(), own.data(), std::min<std::size_t>(own.size(), kHostNameBytes - 1));
  executor::Tensor all =
      executor::Tensor::zeros({words * world.size()}, executor::ScalarType::int32);
  world.all_gather(mine, all);
  std::vector<std::string> names;
  for (int rank = 0; rank < world.size(); ++rank) {
    const char* bytes = static_cast<const char*>(all.raw()) + rank * kHostNameBytes;
    names.emplace_back(bytes, strnlen(bytes, kHostNameBytes));
  }
  return names;
}

}  // namespace

std::string host_name() {
  char name[kHostNameBytes] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

MachineLayout discover_machine_layout(executor::Communicator& world,
                                      std::optional<int> ranks_per_node) {
  const std::vector<std::string> names = host_of_every_rank(world);
  MachineLayout layout;
  for (const std::string& name : names) {
    if (std::find(layout.hosts.begin(), layout.hosts.end(), name) == layout.hosts.end()) {
      layout.hosts.push_back(name);
    }
  }
  const int world_size = world.size();
  if (ranks_per_node) {
    if (world_size % *ranks_per_node != 0) {
      throw schemas::InputError(
          "--gpus-per-node", "",
          fmt::format("this job's {} ranks cannot form nodes of {}: start a multiple of {} ranks",
                      world_size, *ranks_per_node, *ranks_per_node));
    }
    layout.ranks_per_node = *ranks_per_node;
  } else {
    // By host: every host must run the same number of ranks.
    layout.ranks_per_node =
        static_cast<int>(std::count(names.begin(), names.end(), layout.hosts.front()));
    for (const std::string& host : layout.hosts) {
      const auto count = std::count(names.begin(), names.end(), host);
      if (count != layout.ranks_per_node) {
        throw schemas::InputError(
            "strata profile", "",
            fmt::format("host {} runs {} ranks where {} runs {}: a cluster file has nodes of "
                        "equal size, so start the same number on every host (mpirun --map-by "
                        "ppr:N:node)",
                        host, count, layout.hosts.front(), layout.ranks_per_node));
      }
    }
  }
  layout.nodes = world_size / layout.ranks_per_node;
  // A node's ranks are consecutive and on one host.
  for (int rank = 0; rank < world_size; ++rank) {
    const int first = layout.node_of_rank(rank) * layout.ranks_per_node;
    if (names[static_cast<std::size_t>(rank)] != names[static_cast<std::size_t>(first)]) {
      throw schemas::InputError(
          ranks_per_node ? "--gpus-per-node" : "strata profile", "",
          fmt::format("rank {} runs on {} but rank {}, the first of its node, on {}: a node's "
                      "ranks must share a host and be numbered consecutively (mpirun's default "
                      "--map-by slot)",
                      rank, names[static_cast<std::size_t>(rank)], first,
                      names[static_cast<std::size_t>(first)]));
    }
  }
  return layout;
}

}  // namespace strata::profiler
