// Phases of a command that every rank of an MPI job runs: the ranks agree whether any rank
// failed, so that the job prints one line and every rank leaves, instead of some waiting in a
// collective for a rank that has gone. Used by `strata train` and `strata profile`.
#pragma once

#include <functional>

#include "failure_report.h"
#include "strata/executor/distributed/communicator.h"

namespace strata::tools {

// Thrown once a failure has been reported for the whole job: the exit status to return.
struct ReportedFailure {
  int exit_code = kExitInvalidInput;
};

// Runs a setup phase on every rank. In a parallel job the ranks then agree whether any failed:
// the lowest rank that did prints its line — "rank R: " in front when not every rank failed — and
// every rank leaves with the highest exit status. A phase must end with no collective pending,
// so that a rank that failed early and one that did not meet in the agreement.
void run_phase(executor::Communicator& world, const std::function<void()>& phase);

}  // namespace strata::tools
