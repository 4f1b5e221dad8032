// `strata profile` as a library: measure this job's machines (every rank at once, as training
// loads them) and fit a cluster file to them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/profiler/communicator_progress.h"
#include "strata/profiler/compute_measurements.h"
#include "strata/profiler/machine_layout.h"
#include "strata/profiler/network_measurements.h"
#include "strata/profiler/profile_settings.h"
#include "strata/schemas/cluster_config.h"

namespace strata::profiler {

struct MachineProfile {
  schemas::ClusterConfig cluster;
  ComputeMeasurements compute;            // averaged over the ranks
  std::vector<TierMeasurements> network;  // per tier; complete on rank 0
  bool network_measured = false;          // false for a job of one rank
  // How much slower the compute ran at the profile's end than at its start (median over the
  // kernels; negative: faster). Its size is also in sources.spread["compute_drift"].
  double compute_drift = 0;
  // Whether a non-blocking all-reduce advances while the rank computes; absent for one rank.
  std::optional<ProgressMeasurement> progress;
};

// Collective over `world`. `name` names the cluster; `command` is recorded in its sources. With
// one rank the network cannot be measured: the tier is the cpu-local preset's, and the
// description says so.
// `layout` comes from discover_machine_layout over the same world.
MachineProfile profile_machine(executor::Communicator& world, const MachineLayout& layout,
                               const ProfileSettings& settings, const std::string& name,
                               const std::string& command);

}  // namespace strata::profiler
