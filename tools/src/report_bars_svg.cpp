#include "report_bars_svg.h"

#include <fmt/format.h>

#include <algorithm>

#include "report_html.h"

namespace strata::tools {
namespace {

constexpr double kWidth = 1200;
constexpr double kBarLeft = 180;    // room for the row labels
constexpr double kBarRight = 1040;  // room for the totals
constexpr double kRowHeight = 22;
constexpr double kRowGap = 10;
constexpr double kTop = 8;
constexpr double kAxisHeight = 34;

}  // namespace

std::string stacked_bars_svg(const BarChart& chart, std::string_view row_class) {
  double scale_max = 0;
  for (const BarRow& row : chart.rows) {
    double total = 0;
    for (const BarSegment& segment : row.segments) total += std::max(0.0, segment.value);
    scale_max = std::max({scale_max, total, row.limit.value_or(0.0)});
  }
  if (!(scale_max > 0)) scale_max = 1;
  // Ticks in the axis unit, and the scale rounded up to the last of them.
  const std::vector<double> ticks = axis_ticks(scale_max / chart.axis_divisor * 1.02);
  const double axis_end = std::max(ticks.back() * chart.axis_divisor, scale_max);
  const double pixels_per_unit = (kBarRight - kBarLeft) / axis_end;
  const double height =
      kTop + static_cast<double>(chart.rows.size()) * (kRowHeight + kRowGap) + kAxisHeight;

  std::string svg = fmt::format(
      "<svg class=\"bars\" viewBox=\"0 0 {} {}\" width=\"100%\" role=\"img\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n",
      svg_number(kWidth), svg_number(height));
  const double plot_bottom = kTop + static_cast<double>(chart.rows.size()) * (kRowHeight + kRowGap);
  for (const double tick : ticks) {
    const double x = kBarLeft + tick * chart.axis_divisor * pixels_per_unit;
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{0}\" y=\"{3}\">{4}</text>\n",
        svg_number(x), svg_number(kTop - 4), svg_number(plot_bottom), svg_number(plot_bottom + 14),
        tick_label(tick));
  }
  svg += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\">{}</text>\n",
                     svg_number((kBarLeft + kBarRight) / 2), svg_number(plot_bottom + 30),
                     html_escape(chart.axis_unit));
  for (std::size_t i = 0; i < chart.rows.size(); ++i) {
    const BarRow& row = chart.rows[i];
    const double y = kTop + static_cast<double>(i) * (kRowHeight + kRowGap);
    svg += fmt::format("<g class=\"{}\"><text class=\"row-label\" x=\"{}\" y=\"{}\">{}</text>\n",
                       row_class, svg_number(kBarLeft - 8), svg_number(y + kRowHeight / 2 + 4),
                       html_escape(row.label));
    double x = kBarLeft;
    for (const BarSegment& segment : row.segments) {
      const double width = std::max(0.0, segment.value) * pixels_per_unit;
      if (width <= 0) continue;
      svg += fmt::format(
          "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>"
          "\n",
          segment.css_class, svg_number(x), svg_number(y), svg_number(width),
          svg_number(kRowHeight), html_escape(segment.title));
      x += width;
    }
    svg += fmt::format(
        "<text class=\"total\" x=\"{}\" y=\"{}\">{}</text>\n",
        svg_number(std::max(x, row.limit ? kBarLeft + *row.limit * pixels_per_unit : x) + 6),
        svg_number(y + kRowHeight / 2 + 4), html_escape(row.total_text));
    if (row.limit) {
      const double limit_x = kBarLeft + *row.limit * pixels_per_unit;
      svg += fmt::format(
          "<line class=\"limit\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"><title>{3}</title>"
          "</line>\n",
          svg_number(limit_x), svg_number(y - 4), svg_number(y + kRowHeight + 4),
          html_escape(chart.limit_name));
    }
    svg += "</g>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace strata::tools
