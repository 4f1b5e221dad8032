#include "report_comparison.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "report_bars_svg.h"
#include "report_html.h"
#include "report_parts.h"
#include "text_format.h"

namespace strata::tools {
namespace {

// Parts that moved by less than this share of the difference are not worth a reader's time.
constexpr double kNegligibleShare = 0.01;
// Named parts stop once they explain this share of the difference.
constexpr double kExplainedShare = 0.9;
constexpr std::size_t kMostParts = 3;
// A part that moved the other way is named when it offsets at least this share.
constexpr double kOffsetShare = 0.1;

}  // namespace

std::string signed_duration(double seconds) {
  const char* sign = seconds < 0 ? "\u2212" : "+";
  const double magnitude = std::abs(seconds);
  if (magnitude >= 1) return fmt::format("{}{:.2f} s", sign, magnitude);
  if (magnitude >= 0.01) return fmt::format("{}{:.0f} ms", sign, magnitude * 1e3);
  return fmt::format("{}{:.2f} ms", sign, magnitude * 1e3);
}

std::string explain_step_difference(const simulator::StepMetrics& first,
                                    const simulator::StepMetrics& other) {
  const double difference_s = other.step_time_s - first.step_time_s;
  if (std::abs(difference_s) <= 1e-9 * std::max(first.step_time_s, 1e-30)) {
    return "the same predicted step time";
  }
  const double direction = difference_s > 0 ? 1 : -1;
  const std::vector<BreakdownPart> first_parts = breakdown_parts(first.breakdown);
  const std::vector<BreakdownPart> other_parts = breakdown_parts(other.breakdown);
  std::vector<BreakdownPart> changes;  // other − first, part by part
  for (std::size_t i = 0; i < first_parts.size(); ++i) {
    changes.push_back({first_parts[i].part, other_parts[i].seconds - first_parts[i].seconds});
  }
  // Largest change in the difference's direction first.
  std::stable_sort(changes.begin(), changes.end(),
                   [direction](const BreakdownPart& a, const BreakdownPart& b) {
                     return a.seconds * direction > b.seconds * direction;
                   });
  const double magnitude = std::abs(difference_s);
  std::vector<std::string> reasons;
  double explained = 0;
  for (const BreakdownPart& change : changes) {
    const double along = change.seconds * direction;
    if (reasons.size() == kMostParts || explained >= kExplainedShare * magnitude ||
        along < kNegligibleShare * magnitude) {
      break;
    }
    reasons.push_back(
        fmt::format("{} {}", style_of(change.part).name, signed_duration(change.seconds)));
    explained += along;
  }
  std::string text =
      fmt::format("{} ({}{:.2f}%)", signed_duration(difference_s),
                  difference_s < 0 ? "\u2212" : "+", 100 * magnitude / first.step_time_s);
  if (!reasons.empty()) text += ": " + fmt::format("{}", fmt::join(reasons, ", "));
  const BreakdownPart& against = changes.back();  // the largest change the other way
  if (against.seconds * direction <= -kOffsetShare * magnitude) {
    text += fmt::format("; offset by {} {}", style_of(against.part).name,
                        signed_duration(against.seconds));
  }
  return text;
}

std::string comparison_section_html(const std::vector<ReportedPlan>& plans) {
  std::string html =
      "<section id=\"comparison\">\n<h2>The plans side by side</h2>\n<p>Each plan after the "
      "first, against the first: the difference in predicted step time and the parts of the "
      "time breakdown that make it.</p>\n";
  // The sentences explain a layout's cost; across jobs they would explain the job instead.
  const schemas::Plan& first_plan = plans.front().plan;
  const bool same_job = std::all_of(plans.begin(), plans.end(), [&](const ReportedPlan& other) {
    return other.plan.model.name == first_plan.model.name &&
           other.plan.mesh.world_size() == first_plan.mesh.world_size() &&
           other.plan.cluster.gpu.name == first_plan.cluster.gpu.name &&
           other.plan.batch.global_batch_size == first_plan.batch.global_batch_size &&
           other.plan.batch.seq_length == first_plan.batch.seq_length;
  });
  if (!same_job) {
    html +=
        "<p class=\"warning\">These plans are not all of one job (model, GPUs, global batch and "
        "sequence length): their differences are not only the layout's.</p>\n";
  }
  std::vector<std::vector<std::string>> rows;
  const simulator::StepMetrics& first = plans.front().simulation.metrics;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const schemas::Plan& plan = plans[i].plan;
    const simulator::PlanSimulation& simulation = plans[i].simulation;
    const double peak = simulator::peak_memory_bytes(simulation);
    const double capacity = simulation.result.memory.front().capacity_bytes;
    std::string against =
        i == 0 ? "(the plan shown above)" : explain_step_difference(first, simulation.metrics);
    if (peak > capacity) against += "; does not fit in memory";
    rows.push_back({std::to_string(i + 1), plans[i].label, std::to_string(plan.mesh.tp),
                    cp_text(plan), std::to_string(plan.mesh.pp), std::to_string(plan.mesh.dp),
                    std::to_string(plan.mesh.ep), std::to_string(plan.mesh.vpp),
                    std::string(schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames)),
                    std::to_string(plan.batch.micro_batch_size), recompute_text(plan),
                    zero_text(plan), plan.sequence_parallel ? "on" : "off",
                    format_seconds(simulation.metrics.step_time_s),
                    group_thousands(static_cast<std::int64_t>(simulation.metrics.tokens_per_s)),
                    format_percent(simulation.metrics.mfu),
                    fmt::format("{} / {}", format_bytes(peak), format_bytes(capacity)), against});
  }
  html += html_table({"#", "plan", "tp", "cp", "pp", "dp", "ep", "vpp", "schedule", "mb",
                      "recompute", "ZeRO", "sp", "step", "tokens/s", "MFU", "memory", "against #1"},
                     rows,
                     {true, false, true, true, true, true, true, true, false, true, false, false,
                      false, true, true, true, true, false});

  BarChart chart{.rows = {}, .axis_divisor = 1e-3, .axis_unit = "step time (ms)", .limit_name = ""};
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const std::string number = fmt::format("#{}", i + 1);
    BarRow row{plans[i].label == number ? number : fmt::format("{} {}", number, plans[i].label),
               {},
               format_seconds(plans[i].simulation.metrics.step_time_s),
               std::nullopt};
    for (const BreakdownPart& part : breakdown_parts(plans[i].simulation.metrics.breakdown)) {
      row.segments.push_back(
          {style_of(part.part).css_class, part.seconds,
           fmt::format("{}: {}", style_of(part.part).name, format_seconds(part.seconds))});
    }
    chart.rows.push_back(std::move(row));
  }
  html += "<h3>Where each plan's step goes (mean over pipeline ranks)</h3>\n";
  html += breakdown_legend_html();
  html += stacked_bars_svg(chart, "plan-row");
  return html + "</section>\n";
}

}  // namespace strata::tools
