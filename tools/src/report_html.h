// The HTML and SVG text every section of `strata report` is written with: escaping what comes
// from files (model names, plan ids, log lines), tables, and SVG coordinates.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata::tools {

// Text as HTML shows it: & < > " ' replaced by entities, so that a model or plan named "<b>" is
// shown as written and never read as markup (safe in element content and quoted attributes).
std::string html_escape(std::string_view text);

// A <table>: `header` and every cell are plain text (escaped here); columns marked in `numeric`
// are right-aligned.
std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& numeric = {});

// An SVG coordinate or length: two decimals, which is below a pixel at any zoom a reader uses
// and keeps a timeline of thousands of slices small.
std::string svg_number(double value);

// Tick positions for an axis from 0 to `end`: a step of 1, 2 or 5 × 10^k giving 4 to 10 ticks.
std::vector<double> axis_ticks(double end);

// A tick label without trailing zeros: 0.5, 12, 1250.
std::string tick_label(double value);

}  // namespace strata::tools
