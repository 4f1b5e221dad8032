// What a simulation did, slice by slice: kept only when asked for (a trace), since the planner's
// thousands of simulations need only the totals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::simulator {

enum class Stream { compute, pipeline, data_parallel };

struct TimelineSlice {
  std::int64_t rank = 0;  // world rank (full mode) or pipeline rank (symmetric mode)
  Stream stream = Stream::compute;
  std::string name;  // the action, e.g. "3F7", "SEND_B 2B5", "REDUCE_GRAD 1 bucket 0"
  double start_s = 0;
  double duration_s = 0;
  std::int64_t flow_out = -1;  // a send: the id of the arrow to its receive
  std::int64_t flow_in = -1;   // a receive's compute: the arrow that ends here
};

struct MemorySample {
  std::int64_t rank = 0;
  double time_s = 0;
  double bytes = 0;
};

struct Timeline {
  std::vector<TimelineSlice> slices;
  std::vector<MemorySample> memory;
  // Index: the rank field above; empty for a rank whose timeline was not recorded
  // (SimulationOptions::timeline_rank_limit).
  std::vector<std::string> rank_names;
};

}  // namespace strata::simulator
