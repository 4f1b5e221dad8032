// Horizontal stacked bars as inline SVG, for `strata report`: memory per pipeline rank against
// the GPU's capacity, where the time goes per rank, and the compared plans' steps.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tools {

struct BarSegment {
  std::string_view css_class;  // a part's class (report_parts.h)
  double value = 0;            // in the chart's own unit (bytes, seconds)
  std::string title;           // the tooltip: plain text, escaped when drawn
};

struct BarRow {
  std::string label;  // left of the bar (plain text)
  std::vector<BarSegment> segments;
  std::string total_text;       // right of the bar (plain text)
  std::optional<double> limit;  // a line across the row at this value (a GPU's capacity)
};

struct BarChart {
  std::vector<BarRow> rows;
  double axis_divisor = 1;  // value / axis_divisor is what the axis shows
  std::string axis_unit;    // "GiB", "ms"
  std::string limit_name;   // the limit line's tooltip, e.g. "usable capacity"
};

// The bars share one scale, from 0 to the largest bar or limit; `row_class` marks each row's <g>
// (tests count them).
std::string stacked_bars_svg(const BarChart& chart, std::string_view row_class);

}  // namespace strata::tools
