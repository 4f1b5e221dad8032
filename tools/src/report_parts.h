// The parts a step's time and a rank's memory are split into, as `strata report` draws them: a
// name, a CSS class and a colour each, shared by the timeline, the bars and their legends.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/simulator/simulation.h"

namespace strata::tools {

struct PartStyle {
  std::string_view css_class;  // also the rule in report_style_sheet()
  std::string_view name;       // as the legend and the tables say it
  std::string_view colour;
};

// Time on a rank's streams. The timeline tells forward from backward kernels; the breakdown (as
// `strata simulate` prints it) has them together as compute.
enum class TimePart {
  compute,
  forward,
  backward,
  backward_weight,
  recompute,
  tp_comm,
  cp_comm,
  ep_comm,
  host_issue,
  pp_comm,
  dp_comm,
  optimizer,
  bubble,
};
const PartStyle& style_of(TimePart part);

enum class MemoryPart { weights, gradients, optimizer, communicator, activations };
const PartStyle& style_of(MemoryPart part);

// One part of a TimeBreakdown, in the order `strata simulate` lists them.
struct BreakdownPart {
  TimePart part = TimePart::compute;
  double seconds = 0;
};
// Every part of `time` (zeros included, so that two plans' lists line up part by part).
std::vector<BreakdownPart> breakdown_parts(const simulator::TimeBreakdown& time);

// A legend: one swatch and name per part.
std::string legend_html(const std::vector<const PartStyle*>& parts);

// The legend of the breakdown's parts.
std::string breakdown_legend_html();

// The CSS rules that colour every part (fill for SVG shapes, background for legend swatches).
std::string part_style_rules();

}  // namespace strata::tools
