// Formatting numbers and tables for the command line's human-readable reports.
// Used by every subcommand in tools/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/schemas/plan.h"

namespace strata::tools {

std::string group_thousands(std::int64_t value);  // 124439808 -> "124,439,808"
std::string format_gib(double bytes);             // "79.6 GiB" (GiB = 2^30 bytes)
std::string format_flops(double flops);           // "66.1 GFLOP", "1.2 TFLOP"
std::string format_percent(double fraction);      // 0.1234 -> "12.34%"
std::string format_seconds(double seconds);       // "1.234 s", below a second "12.34 ms"
std::string format_bytes(double bytes);           // "0 B", "512 B", "3.0 MiB", "1.5 GiB"
// A plan's ZeRO stage, with its hybrid sharding: "3", or "3 (shard 8)" when each copy of the state
// is sharded over 8 dp ranks.
std::string zero_text(const schemas::Plan& plan);
// The cp size, with " (gather)" when cp attention all-gathers its keys and values instead of
// passing them around the ring.
std::string cp_text(const schemas::Plan& plan);
// The recomputation: "none", "selective", "full", or "full 3/2" with full layers per stage.
std::string recompute_text(const schemas::Plan& plan);

// A table with a header row; columns are left-aligned unless named in `right_aligned`.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::vector<bool> right_aligned = {});
  void add_row(std::vector<std::string> row);
  std::string render(const std::string& indent = "  ") const;

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_aligned_;
};

}  // namespace strata::tools
