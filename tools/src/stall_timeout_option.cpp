#include "stall_timeout_option.h"

#include "cli_checks.h"
#include "strata/executor/distributed/stall_watchdog.h"

namespace strata::tools {

void add_stall_timeout_option(CLI::App& command, double& seconds) {
  command
      .add_option("--stall-timeout", seconds,
                  "Seconds a rank may wait in one collective or receive before the job ends "
                  "naming what it waited for (a stopped or stuck peer); 0: wait forever")
      ->check(number_from(0, 1e7))
      ->capture_default_str();
}

void arm_stall_timeout(const executor::Communicator& world, double seconds) {
  if (world.size() > 1) executor::set_stall_timeout(seconds);
}

}  // namespace strata::tools
