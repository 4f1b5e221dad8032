#include "strata/planner/layer_split.h"

#include <algorithm>
#include <cmath>

namespace strata::planner {
namespace {

// The most layers a stage of `fixed_s` can hold without passing `threshold_s`.
std::int64_t most_layers_by_time(double fixed_s, std::int64_t num_layers, double layer_s,
                                 double threshold_s) {
  if (layer_s > 0) {
    // A small relative slack keeps n·c + fixed = T from being lost to rounding.
    return static_cast<std::int64_t>(
        std::floor((threshold_s - fixed_s) / layer_s * (1 + 1e-12) + 1e-9));
  }
  return threshold_s < fixed_s ? -1 : num_layers;
}

// The most layers `shape` can hold within its memory.
std::int64_t most_layers_by_memory(const StageShape& shape, std::int64_t num_layers,
                                   double capacity_bytes) {
  if (shape.memory_per_layer_bytes > 0) {
    return static_cast<std::int64_t>(
        std::floor((capacity_bytes - shape.memory_fixed_bytes) / shape.memory_per_layer_bytes));
  }
  return shape.memory_fixed_bytes > capacity_bytes ? -1 : num_layers;
}

// The stages as the search sees them: the time limit depends on a stage only through
// (fixed_s, min_layers), which few stages differ in (the first and the last), and the memory
// limit not on the threshold at all — so both are worked out once, not per threshold tried.
class SplitSearch {
 public:
  SplitSearch(std::int64_t num_layers, double layer_s, const std::vector<StageShape>& stages,
              double capacity_bytes)
      : num_layers_(num_layers), layer_s_(layer_s) {
    for (const StageShape& shape : stages) {
      const Shape key{shape.fixed_s, shape.min_layers};
      auto found = std::find(shapes_.begin(), shapes_.end(), key);
      if (found == shapes_.end()) found = shapes_.insert(shapes_.end(), key);
      shape_of_stage_.push_back(static_cast<std::size_t>(found - shapes_.begin()));
      memory_cap_.push_back(
          std::min(most_layers_by_memory(shape, num_layers, capacity_bytes), num_layers));
      least_ += shape.min_layers;
    }
    by_time_.resize(shapes_.size());
  }

  const std::vector<std::pair<double, std::int64_t>>& shapes() const { return shapes_; }

  // Whether every stage can hold at least its minimum and all of them together every layer when
  // no stage passes `threshold_s`; `most` gets each stage's most.
  bool feasible(double threshold_s, std::vector<std::int64_t>* most = nullptr) {
    for (std::size_t k = 0; k < shapes_.size(); ++k) {
      by_time_[k] = most_layers_by_time(shapes_[k].first, num_layers_, layer_s_, threshold_s);
    }
    std::int64_t total = 0;
    for (std::size_t s = 0; s < shape_of_stage_.size(); ++s) {
      const std::int64_t n = std::min(by_time_[shape_of_stage_[s]], memory_cap_[s]);
      if (n < shapes_[shape_of_stage_[s]].second) return false;
      if (most) (*most)[s] = n;
      total += n;
    }
    return total >= num_layers_ && least_ <= num_layers_;
  }

 private:
  using Shape = std::pair<double, std::int64_t>;  // fixed_s, min_layers
  std::int64_t num_layers_;
  double layer_s_;
  std::vector<Shape> shapes_;
  std::vector<std::size_t> shape_of_stage_;
  std::vector<std::int64_t> memory_cap_;
  std::vector<std::int64_t> by_time_;
  std::int64_t least_ = 0;
};

}  // namespace

std::optional<LayerSplit> best_layer_split(std::int64_t num_layers, double layer_s,
                                           const std::vector<StageShape>& stages,
                                           double capacity_bytes) {
  if (stages.empty()) return std::nullopt;
  // The optimum is one of the thresholds n·c + fixed_s, and feasibility grows with the
  // threshold: so it is the least, over the distinct (fixed_s, min_layers), of each one's
  // smallest feasible n·c + fixed_s, found by binary search over n.
  SplitSearch search(num_layers, layer_s, stages, capacity_bytes);
  std::optional<double> best;
  for (const auto& [fixed_s, min_layers] : search.shapes()) {
    const auto threshold_of = [&](std::int64_t n) {
      return static_cast<double>(n) * layer_s + fixed_s;
    };
    std::int64_t low = min_layers;
    std::int64_t high = num_layers;
    if (low > high || (best && threshold_of(low) >= *best)) continue;
    if (!search.feasible(threshold_of(high))) continue;
    while (low < high) {
      const std::int64_t middle = low + (high - low) / 2;
      if (search.feasible(threshold_of(middle))) {
        high = middle;
      } else {
        low = middle + 1;
      }
    }
    if (!best || threshold_of(high) < *best) best = threshold_of(high);
  }
  if (!best) return std::nullopt;
  std::vector<std::int64_t> layers(stages.size());
  search.feasible(*best, &layers);
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
