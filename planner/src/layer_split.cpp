#include "strata/planner/layer_split.h"

#include <algorithm>
#include <cmath>

namespace strata::planner {
namespace {

// The most layers stage `shape` can hold without passing `threshold_s` or its memory.
std::int64_t most_layers(const StageShape& shape, std::int64_t num_layers, double layer_s,
                         double threshold_s, double capacity_bytes) {
  std::int64_t by_time = num_layers;
  if (layer_s > 0) {
    // A small relative slack keeps n·c + fixed = T from being lost to rounding.
    by_time = static_cast<std::int64_t>(
        std::floor((threshold_s - shape.fixed_s) / layer_s * (1 + 1e-12) + 1e-9));
  } else if (threshold_s < shape.fixed_s) {
    by_time = -1;
  }
  std::int64_t by_memory = num_layers;
  if (shape.memory_per_layer_bytes > 0) {
    by_memory = static_cast<std::int64_t>(
        std::floor((capacity_bytes - shape.memory_fixed_bytes) / shape.memory_per_layer_bytes));
  } else if (shape.memory_fixed_bytes > capacity_bytes) {
    by_memory = -1;
  }
  return std::min({by_time, by_memory, num_layers});
}

bool feasible(std::int64_t num_layers, double layer_s, const std::vector<StageShape>& stages,
              double capacity_bytes, double threshold_s, std::vector<std::int64_t>* most) {
  std::int64_t total = 0;
  std::int64_t least = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const std::int64_t n = most_layers(stages[s], num_layers, layer_s, threshold_s, capacity_bytes);
    if (n < stages[s].min_layers) return false;
    if (most) (*most)[s] = n;
    total += n;
    least += stages[s].min_layers;
  }
  return total >= num_layers && least <= num_layers;
}

}  // namespace

std::optional<LayerSplit> best_layer_split(std::int64_t num_layers, double layer_s,
                                           const std::vector<StageShape>& stages,
                                           double capacity_bytes) {
  if (stages.empty()) return std::nullopt;
  std::vector<double> thresholds;
  thresholds.reserve(stages.size() * static_cast<std::size_t>(num_layers + 1));
  for (const StageShape& shape : stages) {
    for (std::int64_t n = shape.min_layers; n <= num_layers; ++n) {
      thresholds.push_back(static_cast<double>(n) * layer_s + shape.fixed_s);
    }
  }
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  if (thresholds.empty() ||
      !feasible(num_layers, layer_s, stages, capacity_bytes, thresholds.back(), nullptr)) {
    return std::nullopt;
  }
  std::size_t low = 0;
  std::size_t high = thresholds.size() - 1;  // feasible
  while (low < high) {
    const std::size_t middle = (low + high) / 2;
    if (feasible(num_layers, layer_s, stages, capacity_bytes, thresholds[middle], nullptr)) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  const double threshold = thresholds[high];
  std::vector<std::int64_t> layers(stages.size());
  feasible(num_layers, layer_s, stages, capacity_bytes, threshold, &layers);
  // Every stage at its most holds at least all layers; hand the surplus back one layer at a time
  // from the slowest stage (the earliest among equals: it keeps the most micro-batches in flight),
  // which balances the stages below the threshold.
  std::int64_t surplus = -num_layers;
  for (std::int64_t n : layers) surplus += n;
  for (; surplus > 0; --surplus) {
    std::size_t slowest = stages.size();
    double slowest_s = -1;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      const double stage_s = static_cast<double>(layers[s]) * layer_s + stages[s].fixed_s;
      if (layers[s] > stages[s].min_layers && stage_s > slowest_s) {
        slowest = s;
        slowest_s = stage_s;
      }
    }
    --layers[slowest];
  }
  LayerSplit split{std::move(layers), 0};
  for (std::size_t s = 0; s < stages.size(); ++s) {
    split.slowest_stage_s = std::max(
        split.slowest_stage_s, static_cast<double>(split.layers[s]) * layer_s + stages[s].fixed_s);
  }
  return split;
}

}  // namespace strata::planner
