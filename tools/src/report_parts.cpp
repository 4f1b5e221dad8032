#include "report_parts.h"

#include <fmt/format.h>

#include <array>

#include "report_html.h"

namespace strata::tools {
namespace {

// Tableau 10, whose hues stay apart for readers with the common colour-vision deficiencies.
constexpr std::array<PartStyle, 13> kTimeStyles{{
    {"t-compute", "compute", "#4e79a7"},
    {"t-forward", "forward", "#4e79a7"},
    {"t-backward", "backward", "#59a14f"},
    {"t-weight", "backward (weight gradient)", "#8cd17d"},
    {"t-recompute", "recompute", "#b07aa1"},
    {"t-tp", "tp communication", "#f28e2b"},
    {"t-cp", "cp communication", "#edc948"},
    {"t-ep", "ep communication", "#ff9da7"},
    {"t-host", "waiting for the host", "#bab0ac"},
    {"t-pp", "pp communication", "#9c755f"},
    {"t-dp", "dp communication", "#e15759"},
    {"t-optimizer", "optimizer", "#76b7b2"},
    {"t-bubble", "pipeline bubble (idle)", "#d7d7d7"},
}};

constexpr std::array<PartStyle, 5> kMemoryStyles{{
    {"m-weights", "weights", "#4e79a7"},
    {"m-gradients", "gradients", "#f28e2b"},
    {"m-optimizer", "optimizer state", "#76b7b2"},
    {"m-communicator", "communicator buffers", "#9c755f"},
    {"m-activations", "activations (with working buffers, ZeRO-3 gathered weights)", "#e15759"},
}};

}  // namespace

const PartStyle& style_of(TimePart part) { return kTimeStyles[static_cast<std::size_t>(part)]; }

const PartStyle& style_of(MemoryPart part) { return kMemoryStyles[static_cast<std::size_t>(part)]; }

std::vector<BreakdownPart> breakdown_parts(const simulator::TimeBreakdown& time) {
  return {{TimePart::compute, time.compute_s},     {TimePart::recompute, time.recompute_s},
          {TimePart::tp_comm, time.tp_comm_s},     {TimePart::cp_comm, time.cp_comm_s},
          {TimePart::ep_comm, time.ep_comm_s},     {TimePart::host_issue, time.host_issue_s},
          {TimePart::pp_comm, time.pp_comm_s},     {TimePart::dp_comm, time.dp_comm_s},
          {TimePart::optimizer, time.optimizer_s}, {TimePart::bubble, time.bubble_s}};
}

std::string legend_html(const std::vector<const PartStyle*>& parts) {
  std::string html = "<div class=\"legend\">";
  for (const PartStyle* style : parts) {
    html += fmt::format("<span class=\"item\"><span class=\"swatch {}\"></span>{}</span>",
                        style->css_class, html_escape(style->name));
  }
  return html + "</div>\n";
}

std::string breakdown_legend_html() {
  std::vector<const PartStyle*> parts;
  for (const BreakdownPart& part : breakdown_parts({})) parts.push_back(&style_of(part.part));
  return legend_html(parts);
}

std::string part_style_rules() {
  std::string css;
  for (const PartStyle& style : kTimeStyles) {
    css += fmt::format(".{0}{{fill:{1};background:{1}}}\n", style.css_class, style.colour);
  }
  for (const PartStyle& style : kMemoryStyles) {
    css += fmt::format(".{0}{{fill:{1};background:{1}}}\n", style.css_class, style.colour);
  }
  return css;
}

}  // namespace strata::tools
