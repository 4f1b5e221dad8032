// The predicted cost of a layout switch's transfer: the plan the executor's switch runs
// (layout/transfer_plan.h) — the same boxes, between the same ranks — with each rank's traffic
// to and from each peer priced as one message over the cluster tier joining them. A rank's sends
// follow one another, as do its receives; the transfer takes as long as the busiest rank's longer
// direction. Building the new layout (groups, model, optimizer) is not priced.
#pragma once

#include <cstdint>
#include <string>

#include "strata/schemas/plan.h"
#include "strata/schemas/plan_set.h"

namespace strata::planner {

struct SwitchPrediction {
  std::int64_t most_sent_bytes = 0;      // by any one rank, to other ranks
  std::int64_t most_received_bytes = 0;  // by any one rank, from other ranks
  double seconds = 0;
};

// Moving every rank's values and AdamW moments (fp32) from `from`'s layout to `to`'s: nothing
// where no rank needs another's elements (identical placements).
SwitchPrediction predict_switch(const schemas::Plan& from, const schemas::Plan& to);

// The plan set's record of a predicted switch between plans `from` and `to` (ids).
schemas::PlanSwitchCost switch_cost(const std::string& from, const std::string& to,
                                    const SwitchPrediction& prediction);

}  // namespace strata::planner
