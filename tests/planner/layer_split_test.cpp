#include "strata/planner/layer_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

namespace strata::planner {
namespace {

// Every composition of `layers` into the stages, by recursion: the reference the binary search
// must match.
double brute_force(std::int64_t layers, double layer_s, const std::vector<StageShape>& stages,
                   double capacity) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<std::int64_t> counts(stages.size());
  std::function<void(std::size_t, std::int64_t)> place = [&](std::size_t s, std::int64_t left) {
    if (s == stages.size()) {
      if (left != 0) return;
      double slowest = 0;
      for (std::size_t i = 0; i < stages.size(); ++i) {
        slowest = std::max(slowest, static_cast<double>(counts[i]) * layer_s + stages[i].fixed_s);
      }
      best = std::min(best, slowest);
      return;
    }
    for (std::int64_t n = stages[s].min_layers; n <= left; ++n) {
      const double bytes =
          stages[s].memory_fixed_bytes + static_cast<double>(n) * stages[s].memory_per_layer_bytes;
      if (bytes > capacity) break;
      counts[s] = n;
      place(s + 1, left - n);
    }
  };
  place(0, layers);
  return best;
}

TEST(LayerSplit, MatchesBruteForceOnRandomSmallCases) {
  std::mt19937 random(20261122);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int feasible_cases = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t num_stages = 1 + random() % 5;
    const std::int64_t layers = static_cast<std::int64_t>(num_stages) + random() % 12;
    const double layer_s = 0.5 + unit(random);
    std::vector<StageShape> stages(num_stages);
    for (std::size_t s = 0; s < num_stages; ++s) {
      StageShape& shape = stages[s];
      shape.min_layers = (s == 0 || s + 1 == num_stages) && num_stages > 1 ? 0 : 1;
      shape.fixed_s = (s == 0 || s + 1 == num_stages) ? 2 * unit(random) : 0;
      shape.memory_fixed_bytes = 10 * unit(random);
      // Earlier stages hold more micro-batches in flight, so their layers cost more memory.
      shape.memory_per_layer_bytes = 1 + static_cast<double>(num_stages - s) * unit(random);
    }
    if (num_stages == 1) stages[0].min_layers = layers;
    const double capacity = 10 + 30 * unit(random);
    const double expected = brute_force(layers, layer_s, stages, capacity);
    const std::optional<LayerSplit> split = best_layer_split(layers, layer_s, stages, capacity);
    if (std::isinf(expected)) {
      EXPECT_FALSE(split.has_value()) << "trial " << trial;
      continue;
    }
    ++feasible_cases;
    ASSERT_TRUE(split.has_value()) << "trial " << trial;
    EXPECT_NEAR(split->slowest_stage_s, expected, 1e-9) << "trial " << trial;
    std::int64_t total = 0;
    for (std::size_t s = 0; s < num_stages; ++s) {
      const std::int64_t n = split->layers[s];
      total += n;
      EXPECT_GE(n, stages[s].min_layers);
      EXPECT_LE(
          stages[s].memory_fixed_bytes + static_cast<double>(n) * stages[s].memory_per_layer_bytes,
          capacity);
    }
    EXPECT_EQ(total, layers);
  }
  EXPECT_GT(feasible_cases, 100);  // the sample exercises both outcomes
}

// 10 layers over 4 stages with a heavy LM head (1.5 layers) on the last: the last stage gets
// fewer layers, and the most balanced optimum is chosen.
TEST(LayerSplit, AHeavyHeadMovesLayersForward) {
  std::vector<StageShape> stages(4);
  stages[0].min_layers = 0;
  stages[3].min_layers = 0;
  stages[3].fixed_s = 1.5;
  const std::optional<LayerSplit> split = best_layer_split(10, 1.0, stages, 1e9);
  ASSERT_TRUE(split);
  EXPECT_DOUBLE_EQ(split->slowest_stage_s, 3.0);
  EXPECT_EQ(split->layers, (std::vector<std::int64_t>{3, 3, 3, 1}));
}

}  // namespace
}  // namespace strata::planner
