// check_schedule: proves a schedule is complete and runs to the end — every forward, backward,
// send and receive exactly once on the rank that owns its stage, and no rank waiting forever —
// by executing it. Used on every custom schedule before use, and by the tests of the generators.
#pragma once

#include <string>
#include <vector>

#include "strata/schedule/pipeline_schedule.h"

namespace strata::schedule {

struct ScheduleStats {
  // Per rank, the most (micro-batch, stage) units whose forward has run and whose backward (B or
  // I) has not: how many micro-batches' activations the rank holds at its peak.
  std::vector<int> peak_in_flight;
};

// Executes the schedule with these rules: a receive waits for its send (sends never block); a
// compute action waits for its inputs (a forward for its stage's input, a backward for its own
// forward and the gradient from the next stage; without explicit sends and receives it waits for
// the neighbouring stage's compute directly); W waits for I; REDUCE_GRAD and RESHARD wait for
// their stage's last gradient or use; TIED_GRAD is a rendezvous of the first and last stage's
// ranks and STEP of all ranks. Throws schemas::InputError(source, "", reason) on the first
// problem, e.g. "schedule.csv: deadlock: rank 0 waits at 0RECV_B0 for 1SEND_B0; ...".
ScheduleStats check_schedule(const PipelineSchedule& schedule, const std::string& source);

}  // namespace strata::schedule
