#include "report_breakdown.h"

#include <fmt/format.h>

#include "report_bars_svg.h"
#include "report_html.h"
#include "report_parts.h"
#include "text_format.h"

namespace strata::tools {
namespace {

BarRow breakdown_row(std::string label, const simulator::TimeBreakdown& time) {
  BarRow row{std::move(label), {}, format_seconds(time.sum()), std::nullopt};
  for (const BreakdownPart& part : breakdown_parts(time)) {
    row.segments.push_back(
        {style_of(part.part).css_class, part.seconds,
         fmt::format("{}: {}", style_of(part.part).name, format_seconds(part.seconds))});
  }
  return row;
}

}  // namespace

std::string breakdown_section_html(const simulator::PlanSimulation& simulation) {
  const simulator::StepMetrics& metrics = simulation.metrics;
  std::string html =
      "<section id=\"breakdown\">\n<h2>Where the time goes</h2>\n<p>The step's time on each "
      "pipeline rank's compute stream, part by part (the parts sum to the step time); the mean "
      "over pipeline ranks first. Communication counts only where the compute waits for it.</p>\n";
  html += breakdown_legend_html();
  BarChart chart{.rows = {}, .axis_divisor = 1e-3, .axis_unit = "ms", .limit_name = ""};
  chart.rows.push_back(breakdown_row("mean", metrics.breakdown));
  // With one pipeline rank, its row would repeat the mean.
  if (simulation.result.breakdown.size() > 1) {
    for (std::size_t rank = 0; rank < simulation.result.breakdown.size(); ++rank) {
      chart.rows.push_back(
          breakdown_row(fmt::format("pipeline rank {}", rank), simulation.result.breakdown[rank]));
    }
  }
  html += stacked_bars_svg(chart, "breakdown-row");
  std::vector<std::vector<std::string>> rows;
  for (const BreakdownPart& part : breakdown_parts(metrics.breakdown)) {
    if (part.seconds == 0 && part.part != TimePart::compute) continue;
    rows.push_back({std::string(style_of(part.part).name), format_seconds(part.seconds),
                    format_percent(part.seconds / metrics.step_time_s)});
  }
  rows.push_back({"step", format_seconds(metrics.step_time_s), format_percent(1)});
  html += html_table({"part", "time", "share"}, rows, {false, true, true});
  return html + "</section>\n";
}

}  // namespace strata::tools
