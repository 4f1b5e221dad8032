// The `strata report` page: one self-contained HTML file (inline CSS and SVG, nothing fetched) with
// the headline numbers, the predicted timeline, memory, the time breakdown, the compared plans
// and a training run's measured steps. Used by `strata report` and `strata plan --report`.
#pragma once

#include <filesystem>
#include <string>

#include "report_data.h"

namespace strata::tools {

// `report.plans` must not be empty.
std::string render_report_html(const Report& report);

// Renders and writes the page atomically (a temporary file renamed over `path`).
void write_report(const std::filesystem::path& path, const Report& report);

}  // namespace strata::tools
