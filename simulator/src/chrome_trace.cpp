#include "strata/simulator/chrome_trace.h"

#include <array>
#include <string_view>

namespace strata::simulator {
namespace {

constexpr std::array<std::string_view, 3> kStreamNames{"compute", "pipeline send/recv",
                                                       "data-parallel"};

double microseconds(double seconds) { return seconds * 1e6; }

}  // namespace

nlohmann::json chrome_trace(const Timeline& timeline) {
  nlohmann::json events = nlohmann::json::array();
  for (std::size_t rank = 0; rank < timeline.rank_names.size(); ++rank) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", rank},
                      {"args", {{"name", timeline.rank_names[rank]}}}});
    events.push_back({{"ph", "M"},
                      {"name", "process_sort_index"},
                      {"pid", rank},
                      {"args", {{"sort_index", rank}}}});
    for (std::size_t stream = 0; stream < kStreamNames.size(); ++stream) {
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", rank},
                        {"tid", stream},
                        {"args", {{"name", kStreamNames[stream]}}}});
    }
  }
  for (const TimelineSlice& slice : timeline.slices) {
    const auto tid = static_cast<int>(slice.stream);
    events.push_back({{"ph", "X"},
                      {"name", slice.name},
                      {"cat", kStreamNames[static_cast<std::size_t>(tid)]},
                      {"pid", slice.rank},
                      {"tid", tid},
                      {"ts", microseconds(slice.start_s)},
                      {"dur", microseconds(slice.duration_s)}});
    if (slice.flow_out >= 0) {
      events.push_back({{"ph", "s"},
                        {"name", "p2p"},
                        {"cat", "p2p"},
                        {"id", slice.flow_out},
                        {"pid", slice.rank},
                        {"tid", tid},
                        {"ts", microseconds(slice.start_s)}});
    }
    if (slice.flow_in >= 0) {
      events.push_back({{"ph", "f"},
                        {"bp", "e"},
                        {"name", "p2p"},
                        {"cat", "p2p"},
                        {"id", slice.flow_in},
                        {"pid", slice.rank},
                        {"tid", tid},
                        {"ts", microseconds(slice.start_s)}});
    }
  }
  for (const MemorySample& sample : timeline.memory) {
    events.push_back({{"ph", "C"},
                      {"name", "memory"},
                      {"pid", sample.rank},
                      {"ts", microseconds(sample.time_s)},
                      {"args", {{"GiB", sample.bytes / (1024.0 * 1024.0 * 1024.0)}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace strata::simulator
