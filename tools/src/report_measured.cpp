#include "report_measured.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report_html.h"
#include "text_format.h"

namespace strata::tools {
namespace {

constexpr double kWidth = 1200;
constexpr double kHeight = 320;
constexpr double kPlotLeft = 80;
constexpr double kPlotRight = 1180;
constexpr double kPlotTop = 12;
constexpr double kPlotBottom = 270;
// Tables longer than this start folded.
constexpr std::size_t kOpenTableRows = 50;
// The log's prediction and the report plan's differ by more than this: say so.
constexpr double kPredictionMismatch = 0.01;

// Measured (points joined by a line) and predicted (a line) per step, in ms.
std::string chart_svg(const std::vector<MeasuredStep>& steps) {
  double top_ms = 0;
  for (const MeasuredStep& step : steps) {
    top_ms = std::max({top_ms, step.measured_s * 1e3, step.predicted_s * 1e3});
  }
  const std::vector<double> y_ticks = axis_ticks(top_ms * 1.05);
  // The axis reaches the highest point even where the last tick falls short of it.
  const double y_end = std::max({y_ticks.back(), top_ms * 1.05, 1e-9});
  const double first = static_cast<double>(steps.front().step);
  const double last = static_cast<double>(steps.back().step);
  const double span = last > first ? last - first : 1;
  const auto x_of = [&](std::int64_t step) {
    return kPlotLeft + (static_cast<double>(step) - first) / span * (kPlotRight - kPlotLeft);
  };
  const auto y_of = [&](double seconds) {
    return kPlotBottom - seconds * 1e3 / y_end * (kPlotBottom - kPlotTop);
  };
  std::string svg = fmt::format(
      "<svg class=\"measured-chart\" viewBox=\"0 0 {} {}\" width=\"100%\" role=\"img\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n",
      svg_number(kWidth), svg_number(kHeight));
  for (const double tick : y_ticks) {
    const double y = kPlotBottom - tick / y_end * (kPlotBottom - kPlotTop);
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>"
        "<text class=\"tick y-tick\" x=\"{3}\" y=\"{4}\">{5}</text>\n",
        svg_number(kPlotLeft), svg_number(kPlotRight), svg_number(y), svg_number(kPlotLeft - 6),
        svg_number(y + 4), tick_label(tick));
  }
  // Step ticks: whole steps, 1, 2 or 5 × 10^k apart.
  for (const double offset : axis_ticks(span)) {
    const double step = first + std::round(offset);
    if (step > last) break;
    svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\">{}</text>\n",
                       svg_number(x_of(static_cast<std::int64_t>(step))),
                       svg_number(kPlotBottom + 16), tick_label(step));
  }
  svg += fmt::format(
      "<text class=\"axis-title\" x=\"{}\" y=\"{}\">step</text>"
      "<text class=\"axis-title\" x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\">step time "
      "(ms)</text>\n",
      svg_number((kPlotLeft + kPlotRight) / 2), svg_number(kPlotBottom + 40),
      svg_number((kPlotTop + kPlotBottom) / 2), svg_number((kPlotTop + kPlotBottom) / 2));
  std::string predicted_points, measured_points;
  for (const MeasuredStep& step : steps) {
    predicted_points +=
        fmt::format("{},{} ", svg_number(x_of(step.step)), svg_number(y_of(step.predicted_s)));
    measured_points +=
        fmt::format("{},{} ", svg_number(x_of(step.step)), svg_number(y_of(step.measured_s)));
  }
  svg += fmt::format("<polyline class=\"predicted-line\" points=\"{}\"/>\n", predicted_points);
  svg += fmt::format("<polyline class=\"measured-line\" points=\"{}\"/>\n", measured_points);
  for (const MeasuredStep& step : steps) {
    svg += fmt::format(
        "<circle class=\"measured-point\" cx=\"{}\" cy=\"{}\" r=\"3\"><title>step {}: measured "
        "{:.2f} ms, predicted {:.2f} ms</title></circle>\n",
        svg_number(x_of(step.step)), svg_number(y_of(step.measured_s)), step.step,
        step.measured_s * 1e3, step.predicted_s * 1e3);
  }
  return svg + "</svg>\n";
}

}  // namespace

double mean_measured_over_predicted(const std::vector<MeasuredStep>& steps) {
  double sum = 0;
  for (const MeasuredStep& step : steps) sum += step.measured_s / step.predicted_s;
  return steps.empty() ? 0 : sum / static_cast<double>(steps.size());
}

std::string measured_section_html(const std::vector<MeasuredStep>& steps,
                                  const std::string& log_name,
                                  const simulator::PlanSimulation& simulation) {
  const double mean_ratio = mean_measured_over_predicted(steps);
  std::vector<double> ratios;
  for (const MeasuredStep& step : steps) ratios.push_back(step.measured_s / step.predicted_s);
  const auto [lowest, highest] = std::minmax_element(ratios.begin(), ratios.end());
  std::string html = fmt::format(
      "<section id=\"measured\">\n<h2>Measured beside predicted</h2>\n<p>{} steps of "
      "<code>{}</code>: measured over predicted step time <strong class=\"mean-ratio\">×{:.3f}"
      "</strong> on average (×{:.3f} to ×{:.3f}).</p>\n",
      steps.size(), html_escape(log_name), mean_ratio, *lowest, *highest);
  const double logged_prediction_s = steps.back().predicted_s;
  const double plan_prediction_s = simulation.metrics.step_time_s;
  if (std::abs(logged_prediction_s - plan_prediction_s) > kPredictionMismatch * plan_prediction_s) {
    html += fmt::format(
        "<p class=\"warning\">The log's prediction ({}) is not this plan's ({}): the log may be "
        "of another plan, or of a build whose cost models differed.</p>\n",
        format_seconds(logged_prediction_s), format_seconds(plan_prediction_s));
  }
  html +=
      "<div class=\"legend\"><span class=\"item\"><span class=\"swatch measured-swatch\"></span>"
      "measured</span><span class=\"item\"><span class=\"swatch predicted-swatch\"></span>"
      "predicted</span></div>\n";
  html += chart_svg(steps);
  std::vector<std::vector<std::string>> rows;
  for (const MeasuredStep& step : steps) {
    rows.push_back({std::to_string(step.step), format_seconds(step.measured_s),
                    format_seconds(step.predicted_s),
                    fmt::format("×{:.3f}", step.measured_s / step.predicted_s)});
  }
  html += fmt::format("<details{}><summary>every step</summary>\n",
                      steps.size() <= kOpenTableRows ? " open" : "");
  html += html_table({"step", "measured", "predicted", "measured / predicted"}, rows,
                     {true, true, true, true});
  return html + "</details>\n</section>\n";
}

}  // namespace strata::tools
