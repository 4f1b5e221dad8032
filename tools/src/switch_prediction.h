// The predicted time of a layout switch's transfer: the plan LayoutTransfer runs
// (executor/checkpoint/layout_transfer.h) — the same pieces, between the same ranks — with each
// rank's traffic to and from each peer priced as one message over the cluster tier joining them.
// A rank's sends follow one another, as do its receives; the transfer takes as long as the busiest
// rank's longer direction. Building the new layout (groups, model, optimizer) is not priced.
#pragma once

#include "strata/schemas/plan.h"

namespace strata::tools {

// Seconds to move every rank's values and AdamW moments (fp32) from `from`'s layout to `to`'s:
// 0 where no rank needs another's elements.
double predicted_switch_seconds(const schemas::Plan& from, const schemas::Plan& to);

}  // namespace strata::tools
