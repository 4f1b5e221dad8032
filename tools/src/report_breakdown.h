// Where a plan's predicted step goes, for `strata report`: the step-time breakdown of
// StepMetrics (as `strata simulate` prints it) as bars, per pipeline rank too, and a table.
#pragma once

#include <string>

#include "strata/simulator/plan_simulation.h"

namespace strata::tools {

// The <section id="breakdown">.
std::string breakdown_section_html(const simulator::PlanSimulation& simulation);

}  // namespace strata::tools
