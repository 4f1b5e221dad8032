// What the command line says about an exception, and with which exit status: one line for stderr
// (without the "strata: " prefix). Shared by run_cli and by `strata train` under MPI, where the
// ranks first agree on who failed so that the job prints the line once.
#pragma once

#include <exception>
#include <string>

namespace strata::tools {

// The exit statuses of every command (docs/commands.md).
inline constexpr int kExitInvalidInput = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInternal = 3;

struct FailureReport {
  int exit_code = 0;
  std::string line;
};

FailureReport failure_report(std::exception_ptr error);

}  // namespace strata::tools
