// A measured profile beside the cluster preset it is closest to: which preset, and per quantity
// the measured value, its spread, the preset's value and their ratio — the table `strata
// profile` prints.
#pragma once

#include <string>
#include <vector>

#include "strata/schemas/cluster_config.h"

namespace strata::profiler {

struct ComparedQuantity {
  std::string quantity;  // "peak fp32 TFLOP/s", "tier 0 bandwidth GB/s", ...
  double measured = 0;
  double spread = 0;  // relative; 0 when not measured separately
  double preset = 0;  // 0: the preset has none
};

struct PresetComparison {
  std::string preset;  // the closest preset's name
  std::vector<ComparedQuantity> rows;
};

// Closest by the sum of |log(measured / preset)| over compute peak, memory bandwidth and the
// innermost tier's bandwidth.
PresetComparison compare_with_presets(const schemas::ClusterConfig& measured);

}  // namespace strata::profiler
