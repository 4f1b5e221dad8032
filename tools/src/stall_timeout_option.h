// --stall-timeout, given by every subcommand that runs ranks together under mpirun (train,
// profile): a job whose peer stopped without dying ends with one line after it instead of
// hanging (executor/distributed/stall_watchdog.h).
#pragma once

#include <CLI/CLI.hpp>

#include "strata/executor/distributed/communicator.h"

namespace strata::tools {

// The default: far longer than any one collective of a healthy job, short enough that a stuck
// job does not hold a cluster for hours.
inline constexpr double kDefaultStallTimeoutSeconds = 600;

void add_stall_timeout_option(CLI::App& command, double& seconds);

// Starts the watchdog when `world` has peers to wait for (one rank waits for none).
void arm_stall_timeout(const executor::Communicator& world, double seconds);

}  // namespace strata::tools
