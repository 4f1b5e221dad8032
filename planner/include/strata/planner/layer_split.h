// The pipeline layer split: how many transformer layers each stage gets so that the slowest stage
// is as fast as it can be, under each stage's memory limit. With identical layers the 1F1B step is
// Σ_s (F_s + B_s) + (m − 1)·max_s (F_s + B_s), and the sum does not depend on the split, so the
// best split minimises the slowest stage.
//
// Exact method: the slowest stage's time is n·c + fixed_s for some stage s and count n, so the
// optimum is one of those values. Binary search over them for the smallest T at which every stage
// can hold at most ⌊(T − fixed_s)/c⌋ layers (and no more than its memory allows) and the stages
// together still hold all layers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace strata::planner {

struct StageShape {
  double fixed_s = 0;  // time that does not depend on layers (embedding, LM head + loss)
  double memory_fixed_bytes = 0;
  double memory_per_layer_bytes = 0;
  std::int64_t min_layers = 1;  // 0 for the first and last stage: embedding- or head-only stages
};

struct LayerSplit {
  std::vector<std::int64_t> layers;  // per stage
  double slowest_stage_s = 0;
};

// nullopt when no split fits memory. Among optimal splits, the most balanced one.
std::optional<LayerSplit> best_layer_split(std::int64_t num_layers, double layer_s,
                                           const std::vector<StageShape>& stages,
                                           double capacity_bytes);

}  // namespace strata::planner
