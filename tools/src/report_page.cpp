#include "report_page.h"

#include <fmt/format.h>

#include <algorithm>

#include "report_breakdown.h"
#include "report_comparison.h"
#include "report_html.h"
#include "report_measured.h"
#include "report_memory.h"
#include "report_parts.h"
#include "report_timeline_svg.h"
#include "strata/schemas/json_file.h"
#include "text_format.h"

namespace strata::tools {
namespace {

constexpr const char* kStyleSheet = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
  color:#222;background:#fff;margin:0 auto;max-width:1240px;padding:16px 20px 40px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:28px 0 6px;
  border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:18px 0 4px}
p{margin:6px 0}.plan-line{color:#555}code{font-size:13px}
.headline{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.headline .figure{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:140px}
.headline .value{font-size:20px;font-weight:600}.headline .name{color:#666;font-size:12px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{padding:3px 9px;border-bottom:1px solid #e5e5e5;text-align:left;vertical-align:top;
  white-space:nowrap}
td:last-child{white-space:normal}
th{background:#f6f6f6}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;
  white-space:nowrap}
svg{display:block;margin:6px 0;overflow:visible}
svg text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;fill:#333}
svg .row-label{text-anchor:end}svg .tick{text-anchor:middle;fill:#666;font-size:11px}
svg .y-tick{text-anchor:end}svg .axis-title{text-anchor:middle;fill:#444}
svg .grid{stroke:#e3e3e3;stroke-width:1}svg .limit{stroke:#c00;stroke-width:2.5;
  stroke-dasharray:5 3}
svg .idle{fill:url(#idle-hatch)}
svg .measured-line{fill:none;stroke:#e15759;stroke-width:1.5}
svg .predicted-line{fill:none;stroke:#4e79a7;stroke-width:2;stroke-dasharray:6 3}
svg .measured-point{fill:#e15759}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;margin:6px 0;font-size:12px}
.legend .item{display:inline-flex;align-items:center;gap:5px}
.swatch{display:inline-block;width:14px;height:11px;border-radius:2px}
.idle-swatch{background:repeating-linear-gradient(45deg,#cfcfcf 0 2px,#f2f2f2 2px 6px);
  border:1px solid #ddd}
.measured-swatch{background:#e15759}.predicted-swatch{background:#4e79a7}
.warning{color:#a40}.note{color:#666;font-size:13px}
footer{margin-top:30px;color:#888;font-size:12px}
)";

std::string headline_figure(const std::string& value, const std::string& name) {
  return fmt::format(
      "<div class=\"figure\"><div class=\"value\">{}</div><div class=\"name\">{}</div></div>",
      html_escape(value), html_escape(name));
}

// What the plan is, in one line: the layout and the batch.
std::string plan_line(const ReportedPlan& reported) {
  const schemas::Plan& plan = reported.plan;
  const schemas::Mesh& mesh = plan.mesh;
  return fmt::format(
      "{}: tp {} · cp {} · pp {} · dp {}{}{}, {}, micro-batch {} × {} of {} tokens, recompute {}, "
      "sequence parallel {}, ZeRO {}, {}",
      reported.label, mesh.tp, cp_text(plan), mesh.pp, mesh.dp,
      mesh.vpp > 1 ? fmt::format(" · vpp {}", mesh.vpp) : std::string(),
      plan.model.moe ? fmt::format(" · ep {} · etp {}", mesh.ep, mesh.etp) : std::string(),
      schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames),
      plan.batch.micro_batch_size, plan.batch.num_micro_batches, plan.batch.seq_length,
      recompute_text(plan), plan.sequence_parallel ? "on" : "off", zero_text(plan),
      schemas::name_of(plan.precision, schemas::kDtypeNames));
}

std::string summary_section_html(const ReportedPlan& reported) {
  const simulator::StepMetrics& metrics = reported.simulation.metrics;
  const std::vector<simulator::RankMemory>& memory = reported.simulation.result.memory;
  const auto largest =
      std::max_element(memory.begin(), memory.end(),
                       [](const simulator::RankMemory& a, const simulator::RankMemory& b) {
                         return a.peak_bytes < b.peak_bytes;
                       });
  std::string html = "<section id=\"summary\">\n<div class=\"headline\">";
  html += headline_figure(format_seconds(metrics.step_time_s), "step time");
  html +=
      headline_figure(group_thousands(static_cast<std::int64_t>(metrics.tokens_per_s)), "tokens/s");
  html += headline_figure(format_percent(metrics.mfu), "MFU");
  html += headline_figure(format_percent(metrics.bubble_fraction), "pipeline bubble");
  html += headline_figure(
      fmt::format("{} / {}", format_bytes(largest->peak_bytes),
                  format_bytes(largest->capacity_bytes)),
      largest->fits() ? "memory peak / usable" : "memory peak / usable: does not fit");
  html +=
      headline_figure(fmt::format("{:.3g}", metrics.model_tflops_per_gpu), "model TFLOP/s per GPU");
  return html + "</div>\n</section>\n";
}

std::string timeline_section_html(const ReportedPlan& reported) {
  const simulator::PlanSimulation& simulation = reported.simulation;
  std::string html =
      "<section id=\"timeline\">\n<h2>The predicted step</h2>\n<p>What each simulated rank "
      "does through one step: compute (with the communication a pass waits for drawn at its "
      "end, in proportion to the pass's cost model), pipeline sends below it, data-parallel "
      "collectives at the bottom. Hover a slice for its action and times.</p>\n";
  if (simulation.simulated_micro_batches < reported.plan.batch.num_micro_batches) {
    html += fmt::format(
        "<p class=\"note\">This timeline is a step of {} micro-batches; the plan's {} are "
        "predicted from it and a shorter one (the pipeline is full past its warm-up), so the "
        "step time above is {}.</p>\n",
        simulation.simulated_micro_batches, reported.plan.batch.num_micro_batches,
        format_seconds(simulation.metrics.step_time_s));
  }
  const std::size_t drawn = static_cast<std::size_t>(std::count_if(
      simulation.result.timeline.rank_names.begin(), simulation.result.timeline.rank_names.end(),
      [](const std::string& name) { return !name.empty(); }));
  if (drawn < simulation.result.timeline.rank_names.size()) {
    html += fmt::format(
        "<p class=\"note\">{} of the {} simulated ranks are drawn: every pipeline rank of the "
        "first data-, tensor- and context-parallel replicas (the prediction is of every "
        "rank).</p>\n",
        drawn, simulation.result.timeline.rank_names.size());
  }
  html += timeline_legend_html();
  html += timeline_svg(simulation);
  return html + "</section>\n";
}

}  // namespace

std::string render_report_html(const Report& report) {
  const ReportedPlan& shown = report.plans.front();
  const schemas::Plan& plan = shown.plan;
  const std::string title =
      fmt::format("{} on {} × {} ({})", plan.model.name, plan.mesh.world_size(),
                  plan.cluster.gpu.name, plan.cluster.name);
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>Strata report: {0}</title>\n<style>{1}{2}</style>\n</head>\n<body>\n"
      "<header>\n<h1>{0}</h1>\n<p class=\"plan-line\">{3}</p>\n</header>\n",
      html_escape(title), kStyleSheet, part_style_rules(), html_escape(plan_line(shown)));
  html += summary_section_html(shown);
  html += timeline_section_html(shown);
  html += memory_section_html(shown.simulation);
  html += breakdown_section_html(shown.simulation);
  if (report.plans.size() > 1) html += comparison_section_html(report.plans);
  if (!report.measured.empty()) {
    html += measured_section_html(report.measured, report.measured_source, shown.simulation);
  }
  html +=
      "<footer>Written by <code>strata report</code> from the simulator's prediction "
      "(docs/report.md).</footer>\n</body>\n</html>\n";
  return html;
}

void write_report(const std::filesystem::path& path, const Report& report) {
  schemas::write_file_atomically(path, render_report_html(report));
}

}  // namespace strata::tools
