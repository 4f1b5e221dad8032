// The checks the Python module's arguments go through (plan_request.h, describe_report.h): the
// module passes plan() and describe() arguments to these functions as numbers, with no
// command-line validator before them. Random values, extreme ones among them, must give a
// schemas::InputError naming the flag, or options inside the command line's bounds — never
// another exception, NaN or a silent default (this runs under the sanitizers too; the module
// itself is not built there).
#include "plan_request.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "describe_report.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/presets.h"

namespace strata::tools {
namespace {

TEST(PlanRequest, RandomArgumentsGiveOptionsInBoundsOrAnErrorNamingTheFlag) {
  const schemas::ModelConfig model = schemas::model_preset("gpt-tiny");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("cpu-local:2");
  const std::vector<std::int64_t> integers = {1,
                                              2,
                                              8,
                                              64,
                                              256,
                                              0,
                                              -1,
                                              -7,
                                              100,
                                              101,
                                              16777216,
                                              16777217,
                                              std::numeric_limits<std::int64_t>::max(),
                                              std::numeric_limits<std::int64_t>::min()};
  const std::vector<double> reserves = {
      0, 0.5, 0.9, 0.91, -0.1, std::nan(""), std::numeric_limits<double>::infinity()};
  const std::vector<std::string> names = {"bf16", "fp32", "fp5", "strata", "pytorch", "x", ""};
  std::mt19937_64 random(20261129);
  const auto pick = [&](const auto& values) {
    return values[std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(random)];
  };
  int accepted = 0, refused = 0;
  for (int round = 0; round < 2000; ++round) {
    PlanRequest request;
    request.global_batch = pick(integers);
    if (random() % 2) request.seq_length = pick(integers);
    const std::int64_t top = pick(integers);
    request.top_k = static_cast<std::size_t>(top);  // a negative count wraps, as a cast would
    if (random() % 3 == 0) request.max_tp = pick(integers);
    request.memory_reserve = random() % 3 == 0 ? pick(reserves) : 0;
    if (random() % 3 == 0) request.precision = pick(names);
    if (random() % 3 == 0) request.framework = pick(names);
    std::string note;
    try {
      const planner::SearchOptions options = plan_search_options(request, model, cluster, note);
      EXPECT_GE(options.global_batch_size, 1);
      EXPECT_LE(options.global_batch_size, schemas::kMaxGlobalBatchSize);
      EXPECT_GE(options.seq_length, 1);
      EXPECT_LE(options.seq_length, model.max_seq_length);
      EXPECT_GE(options.top_k, 1u);
      EXPECT_LE(options.top_k, static_cast<std::size_t>(kMaxTopPlans));
      EXPECT_TRUE(options.memory_reserve_fraction >= 0 &&
                  options.memory_reserve_fraction <= kMaxMemoryReserve);
      ++accepted;
    } catch (const schemas::InputError& error) {
      EXPECT_TRUE(error.source().starts_with("--")) << error.what();
      ++refused;
    }
    try {
      const std::optional<std::int64_t> seq =
          random() % 2 ? std::optional(pick(integers)) : std::nullopt;
      const DescribedModel described = describe_model(model, cluster, "bf16", seq);
      EXPECT_GT(described.flops.training(), 0);
      EXPECT_TRUE(std::isfinite(described.flops.training()));
    } catch (const schemas::InputError& error) {
      EXPECT_EQ(error.source(), "--seq-len") << error.what();
    }
  }
  EXPECT_GT(accepted, 50);
  EXPECT_GT(refused, 50);
}

}  // namespace
}  // namespace strata::tools
