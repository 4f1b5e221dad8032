#include "report_html.h"

#include <fmt/format.h>

#include <cmath>

namespace strata::tools {

std::string html_escape(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& numeric) {
  const auto cell_class = [&](std::size_t column) {
    return column < numeric.size() && numeric[column] ? " class=\"num\"" : "";
  };
  std::string html = "<table>\n<thead><tr>";
  for (std::size_t c = 0; c < header.size(); ++c) {
    html += fmt::format("<th{}>{}</th>", cell_class(c), html_escape(header[c]));
  }
  html += "</tr></thead>\n<tbody>\n";
  for (const std::vector<std::string>& row : rows) {
    html += "<tr>";
    for (std::size_t c = 0; c < row.size(); ++c) {
      html += fmt::format("<td{}>{}</td>", cell_class(c), html_escape(row[c]));
    }
    html += "</tr>\n";
  }
  return html + "</tbody>\n</table>\n";
}

std::string svg_number(double value) {
  std::string text = fmt::format("{:.2f}", value);
  // "12.50" -> "12.5", "3.00" -> "3": a third of a timeline's bytes are these digits.
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

std::vector<double> axis_ticks(double end) {
  if (!(end > 0) || !std::isfinite(end)) return {0};
  const double magnitude = std::pow(10.0, std::floor(std::log10(end / 4)));
  double step = magnitude;
  for (const double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (end / step <= 10) break;
  }
  std::vector<double> ticks;
  for (int i = 0; i * step <= end * (1 + 1e-9); ++i) ticks.push_back(i * step);
  return ticks;
}

std::string tick_label(double value) {
  std::string text = fmt::format("{:.6g}", value);
  return text;
}

}  // namespace strata::tools
