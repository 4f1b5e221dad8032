// The predicted step as `strata report` draws it: one SVG row per simulated rank, from the
// simulator's recorded timeline (the data `strata simulate --trace` writes as a Chrome trace).
#pragma once

#include <string>

#include "strata/simulator/plan_simulation.h"

namespace strata::tools {

// Each row has three lanes, as the simulator's streams:
//
//   pipeline rank 0  |▓▓F▓▓|▓▓F▓▓|////|▓▓▓B▓▓▓|▓▓▓B▓▓▓|   compute (hatched: idle)
//                    |       ▮     ▮        ▮          |   pipeline sends
//                    |                      ████ ████  |   data-parallel collectives
//                    0 ms                         12 ms
//
// A pass's exposed communication (tp, cp, ep, ZeRO-3 gathers) and its wait for the host are drawn
// at the end of its slice in their parts' colours, in proportion to the pass's cost model: the
// simulator times the pass as a whole; inside it the kernels and collectives interleave.
// `simulation` must have been run with record_timeline; rows carry class "rank-row".
std::string timeline_svg(const simulator::PlanSimulation& simulation);

// The parts the timeline draws, for its legend.
std::string timeline_legend_html();

}  // namespace strata::tools
