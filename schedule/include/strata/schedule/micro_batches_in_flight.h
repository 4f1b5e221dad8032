// How many micro-batches (model-chunk micro-batches under interleaving) a pipeline rank holds at
// its peak — forwards run whose backward has not — under each generated schedule: what its
// activation memory is. The planner bounds memory with it before it simulates; the generators'
// tests hold check_schedule's measured peak equal to it for every shape.
#pragma once

#include <cstdint>

#include "strata/schemas/plan.h"

namespace strata::schedule {

// For `rank` of `pp` pipeline ranks with `vpp` chunks each and `m` micro-batches. Custom
// schedules have no formula (check_schedule measures theirs).
std::int64_t peak_micro_batches_in_flight(schemas::ScheduleType schedule, std::int64_t pp,
                                          std::int64_t vpp, std::int64_t m, std::int64_t rank);

}  // namespace strata::schedule
