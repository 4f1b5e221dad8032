// A simulated step as a Chrome trace-event file (https://ui.perfetto.dev opens it): one process
// per rank, one thread per stream (compute, pipeline sends, data-parallel collectives), flow
// arrows from each send to the compute that waited for it, and a memory counter per rank.
#pragma once

#include <nlohmann/json.hpp>

#include "strata/simulator/timeline.h"

namespace strata::simulator {

nlohmann::json chrome_trace(const Timeline& timeline);

}  // namespace strata::simulator
