// Memory per pipeline rank against the GPU's capacity, for `strata report`: the simulator's
// peak, part by part (weights, gradients, optimizer state, buffers, activations), as bars and a
// table.
#pragma once

#include <string>

#include "strata/simulator/plan_simulation.h"

namespace strata::tools {

// The <section id="memory">; rows carry class "memory-row".
std::string memory_section_html(const simulator::PlanSimulation& simulation);

}  // namespace strata::tools
