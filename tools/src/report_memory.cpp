#include "report_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "report_bars_svg.h"
#include "report_html.h"
#include "report_parts.h"
#include "text_format.h"

namespace strata::tools {

std::string memory_section_html(const simulator::PlanSimulation& simulation) {
  const std::vector<simulator::RankMemory>& memory = simulation.result.memory;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::string html =
      "<section id=\"memory\">\n<h2>Memory per pipeline rank</h2>\n<p>Each pipeline rank's "
      "predicted peak, part by part, against the GPU memory a plan may use (the line: the "
      "GPU's capacity less the cluster's reserve). Every rank of a pipeline stage holds the "
      "same.</p>\n";
  const bool communicator =
      std::any_of(memory.begin(), memory.end(),
                  [](const simulator::RankMemory& m) { return m.communicator_bytes > 0; });
  std::vector<const PartStyle*> legend{&style_of(MemoryPart::weights),
                                       &style_of(MemoryPart::gradients),
                                       &style_of(MemoryPart::optimizer)};
  if (communicator) legend.push_back(&style_of(MemoryPart::communicator));
  legend.push_back(&style_of(MemoryPart::activations));
  html += legend_html(legend);
  BarChart chart{
      .rows = {}, .axis_divisor = kGiB, .axis_unit = "GiB", .limit_name = "usable capacity"};
  std::vector<std::vector<std::string>> rows;
  for (std::size_t rank = 0; rank < memory.size(); ++rank) {
    const simulator::RankMemory& m = memory[rank];
    const std::pair<MemoryPart, double> parts[] = {
        {MemoryPart::weights, m.weights_bytes},
        {MemoryPart::gradients, m.gradients_bytes},
        {MemoryPart::optimizer, m.optimizer_bytes},
        {MemoryPart::communicator, m.communicator_bytes},
        {MemoryPart::activations, m.activations_peak_bytes}};
    BarRow row{fmt::format("pipeline rank {}", rank),
               {},
               fmt::format("{} / {}{}", format_bytes(m.peak_bytes), format_bytes(m.capacity_bytes),
                           m.fits() ? "" : " (does not fit)"),
               m.capacity_bytes};
    for (const auto& [part, bytes] : parts) {
      row.segments.push_back({style_of(part).css_class, bytes,
                              fmt::format("{}: {}", style_of(part).name, format_bytes(bytes))});
    }
    chart.rows.push_back(std::move(row));
    std::vector<std::string> cells{std::to_string(rank), format_bytes(m.weights_bytes),
                                   format_bytes(m.gradients_bytes),
                                   format_bytes(m.optimizer_bytes)};
    if (communicator) cells.push_back(format_bytes(m.communicator_bytes));
    cells.insert(cells.end(), {format_bytes(m.activations_peak_bytes), format_bytes(m.peak_bytes),
                               format_bytes(m.capacity_bytes), m.fits() ? "yes" : "NO"});
    rows.push_back(std::move(cells));
  }
  html += stacked_bars_svg(chart, "memory-row");
  std::vector<std::string> header{"pipeline rank", "weights", "gradients", "optimizer"};
  if (communicator) header.push_back("communicator");
  header.insert(header.end(), {"activations", "peak", "capacity", "fits"});
  std::vector<bool> numeric(header.size(), true);
  numeric.back() = false;
  html += html_table(header, rows, numeric);
  return html + "</section>\n";
}

}  // namespace strata::tools
