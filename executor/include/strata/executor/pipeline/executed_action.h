// What a rank executed of its action list during a traced step, and the gathering of every
// rank's onto rank 0 for the measured half of `strata train --trace`.
#pragma once

#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/schedule/action.h"

namespace strata::executor {

// When one action ran on this rank, in seconds from the step's start.
struct ExecutedAction {
  schedule::Action action;
  double start_s = 0, end_s = 0;
};

// Every rank's executed actions, by world rank, on rank 0 of `world` (null: this rank's alone);
// other ranks get an empty list. Collective over `world`.
std::vector<std::vector<ExecutedAction>> gather_executed_actions(
    const std::vector<ExecutedAction>& mine, Communicator* world);

}  // namespace strata::executor
