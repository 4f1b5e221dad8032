// The communicator's collectives measured per network tier: all-reduce, all-gather,
// reduce-scatter and send/receive over message sizes and group shapes, inside a node (the ranks
// sharing a host) and across nodes (one rank per host), timed as the slowest member saw them.
#pragma once

#include <string>
#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/profiler/machine_layout.h"
#include "strata/profiler/profile_settings.h"
#include "strata/profiler/repeated_timing.h"
#include "strata/schemas/cluster_config.h"

namespace strata::profiler {

// The collectives measured are those a cluster file's tier can carry a curve for.
using MeasuredCollective = schemas::TierCollective;
// As a report prints it: "all-reduce", "send/receive", ...
std::string_view collective_name(MeasuredCollective collective);

struct CollectiveSample {
  MeasuredCollective collective = MeasuredCollective::all_reduce;
  int group_size = 2;
  double bytes = 0;  // the whole buffer: all-reduce's tensor, all-gather's output, one message
  Timing timing;
};

struct TierMeasurements {
  std::string name;              // "shared-memory" inside a host, "network" across hosts
  int scope_ranks = 1;           // ranks one group of this tier connects
  std::vector<int> group_sizes;  // the sizes of the groups measured (see measured_group_sizes)
  std::vector<CollectiveSample> samples;
};

// The group sizes a tier of `members` is measured at: each power of two that divides it, then
// all of them. A tensor-parallel pair inside an 8-rank node runs its collectives in 2 ring steps
// where the whole node takes 14, while the node's other pairs load the same memory and links; a
// tier's latency and bandwidth are fitted over every shape, as the plans will use it. Every
// size's groups are consecutive members and run at once, as training's groups do.
std::vector<int> measured_group_sizes(int members);

// Collective over `world` (every rank calls it): the tiers the job's layout has — none for a job
// of one rank.
std::vector<TierMeasurements> measure_network(executor::Communicator& world,
                                              const MachineLayout& layout,
                                              const ProfileSettings& settings);

}  // namespace strata::profiler
