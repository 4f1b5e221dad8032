// check_plan_program: the one admission rule for a plan's action lists, beyond check_schedule's
// (which proves they are complete and run to the end). It refuses what the plan cannot run as it
// says — an UNSHARD without ZeRO-3 or a ZeRO-3 stage used without one, a missing REDUCE_GRAD where
// dp·cp > 1, a TIED_GRAD where nothing is tied or a tie left out, STEP not last or not once on
// every rank. build_plan_schedule applies it, so validate, simulate, schedule and train accept
// and refuse the same files with the same line.
#pragma once

#include <string>

#include "strata/schedule/pipeline_schedule.h"
#include "strata/schemas/plan.h"

namespace strata::schedule {

// Throws schemas::InputError(source, "", "rank R: ACTION: why") on the first action (or missing
// action) the plan cannot run.
void check_plan_program(const PipelineSchedule& schedule, const schemas::Plan& plan,
                        const std::string& source);

}  // namespace strata::schedule
