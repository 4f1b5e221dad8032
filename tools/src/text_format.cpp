#include "text_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>
#include <vector>

namespace strata::tools {

std::string group_thousands(std::int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return value < 0 ? "-" + grouped : grouped;
}

std::string format_gib(double bytes) {
  return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
}

std::string format_flops(double flops) {
  if (flops >= 1e12) return fmt::format("{:.2f} TFLOP", flops / 1e12);
  if (flops >= 1e9) return fmt::format("{:.2f} GFLOP", flops / 1e9);
  return fmt::format("{:.2f} MFLOP", flops / 1e6);
}

std::string format_percent(double fraction) { return fmt::format("{:.2f}%", 100.0 * fraction); }

std::string format_seconds(double seconds) {
  return seconds >= 1 ? fmt::format("{:.3f} s", seconds) : fmt::format("{:.2f} ms", seconds * 1e3);
}

std::string recompute_text(const schemas::Plan& plan) {
  const std::string name(
      schemas::name_of(plan.recompute.granularity, schemas::kRecomputeGranularityNames));
  if (!plan.recompute.modules.empty()) {
    std::vector<std::string_view> modules;
    for (schemas::RecomputeModule module : plan.recompute.modules) {
      modules.push_back(schemas::name_of(module, schemas::kRecomputeModuleNames));
    }
    return fmt::format("{} ({})", name, fmt::join(modules, ", "));
  }
  if (plan.recompute.full_layers_per_stage.empty()) return name;
  return fmt::format("full {}", fmt::join(plan.recompute.full_layers_per_stage, "/"));
}

std::string format_bytes(double bytes) {
  constexpr double kKiB = 1024;
  if (bytes < kKiB) return fmt::format("{:.0f} B", bytes);
  if (bytes < kKiB * kKiB) return fmt::format("{:.1f} KiB", bytes / kKiB);
  if (bytes < kKiB * kKiB * kKiB) return fmt::format("{:.1f} MiB", bytes / (kKiB * kKiB));
  return format_gib(bytes);
}

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> right_aligned)
    : right_aligned_(std::move(right_aligned)) {
  right_aligned_.resize(header.size(), false);
  rows_.push_back(std::move(header));
}

void TextTable::add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

std::string TextTable::render(const std::string& indent) const {
  std::vector<std::size_t> widths(right_aligned_.size(), 0);
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string text;
  for (const auto& row : rows_) {
    std::string line = indent;
    for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      if (c > 0) line += "  ";
      line += right_aligned_[c] ? fmt::format("{:>{}}", row[c], widths[c])
                                : fmt::format("{:<{}}", row[c], widths[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  }
  return text;
}

std::string zero_text(const schemas::Plan& plan) {
  if (plan.mesh.zero_shard_dp() == plan.mesh.dp) return std::to_string(plan.zero_stage);
  return fmt::format("{} (shard {})", plan.zero_stage, plan.mesh.dp_shard);
}

std::string cp_text(const schemas::Plan& plan) {
  if (plan.cp_comm == schemas::ContextParallelComm::ring) return std::to_string(plan.mesh.cp);
  return fmt::format("{} (gather)", plan.mesh.cp);
}

}  // namespace strata::tools
