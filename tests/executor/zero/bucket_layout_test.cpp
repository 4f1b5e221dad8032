// The bucket layout against an oracle, over every bucket size from one element to the whole
// model, dp 1, 2, 3, 5 and 8, each ZeRO stage, tied and untied embeddings, and models whose sizes
// dp does not divide (padding). The oracle states what a layout must be, not how bucket_layout
// builds it: the buckets tile the store's elements in order at unit boundaries; walking from the
// head, a bucket closes at the first unit that brings it to bucket_elements (every unit under
// ZeRO-3); each is padded to the least multiple of dp, its shards lie one after another, its
// entries are exactly those that start inside it, and one rank's owned ranges cover each element
// once.
#include "strata/executor/zero/bucket_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "executor_models.h"
#include "strata/executor/model/parameter_units.h"
#include "strata/executor/model/transformer.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

// [begin, end) of each unit in the store's flat layout.
std::vector<std::pair<std::int64_t, std::int64_t>> unit_ranges(const schemas::ModelConfig& model,
                                                               const ParameterStore& store) {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges(
      static_cast<std::size_t>(parameter_unit_count(model)), {-1, -1});
  for (const ParameterEntry& entry : store.entries()) {
    auto& range = ranges[static_cast<std::size_t>(parameter_unit(model, entry.spec.name))];
    const std::int64_t end = entry.offset + shape_numel(entry.shape);
    range.first = range.first < 0 ? entry.offset : std::min(range.first, entry.offset);
    range.second = std::max(range.second, end);
  }
  return ranges;
}

void expect_layout_holds(const schemas::ModelConfig& model, const ParameterStore& store,
                         const BucketLayoutOptions& options, const std::string& where) {
  const std::vector<int> unit_stage(static_cast<std::size_t>(parameter_unit_count(model)), 0);
  const std::vector<BucketRange> buckets = bucket_layout(model, store, unit_stage, options);
  const auto units = unit_ranges(model, store);
  ASSERT_FALSE(buckets.empty()) << where;
  // Tiling: forward order, contiguous, whole units, the whole store.
  EXPECT_EQ(buckets.front().first_unit, 0) << where;
  EXPECT_EQ(buckets.back().last_unit, parameter_unit_count(model) - 1) << where;
  std::int64_t next_element = 0, next_unit = 0, shard_offset = 0;
  std::vector<int> owned_count(static_cast<std::size_t>(store.total_elements()), 0);
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const BucketRange& bucket = buckets[b];
    const std::string at = where + ", bucket " + std::to_string(b);
    EXPECT_EQ(bucket.first_unit, next_unit) << at;
    EXPECT_EQ(bucket.begin, next_element) << at;
    EXPECT_EQ(bucket.begin, units[static_cast<std::size_t>(bucket.first_unit)].first) << at;
    EXPECT_EQ(bucket.begin + bucket.elements,
              units[static_cast<std::size_t>(bucket.last_unit)].second)
        << at;
    next_unit = bucket.last_unit + 1;
    next_element = bucket.begin + bucket.elements;
    // Closing: ZeRO-3 one unit a bucket; otherwise the first unit (walking back from the head)
    // that reaches the size closes it, so without its lowest unit a bucket is short of it —
    // except the one that reaches the embedding, which closes whatever it holds.
    if (options.rule.zero_stage == 3) {
      EXPECT_EQ(bucket.first_unit, bucket.last_unit) << at;
    } else {
      const std::int64_t without_first = bucket.begin + bucket.elements -
                                         units[static_cast<std::size_t>(bucket.first_unit)].second;
      if (bucket.first_unit < bucket.last_unit) {
        EXPECT_LT(without_first, options.rule.bucket_elements) << at;
      }
      if (bucket.first_unit > 0) {
        EXPECT_GE(bucket.elements, options.rule.bucket_elements) << at;
      }
    }
    // Padding: the least multiple of dp; shards one after another.
    EXPECT_EQ(bucket.padded % options.rule.dp, 0) << at;
    EXPECT_GE(bucket.padded, bucket.elements) << at;
    EXPECT_LT(bucket.padded - bucket.elements, options.rule.dp) << at;
    EXPECT_EQ(bucket.shard * options.rule.dp, bucket.padded) << at;
    EXPECT_EQ(bucket.shard_offset, shard_offset) << at;
    shard_offset += bucket.shard;
    // Entries: exactly those that start inside the bucket, in store order.
    std::vector<std::size_t> expected;
    for (std::size_t e = 0; e < store.entries().size(); ++e) {
      const std::int64_t offset = store.entries()[e].offset;
      if (offset >= bucket.begin && offset < bucket.begin + bucket.elements) expected.push_back(e);
    }
    EXPECT_EQ(bucket.entries, expected) << at;
    EXPECT_FALSE(bucket.experts) << at;
    for (const auto& [first, last] : bucket.owned) {
      ASSERT_LE(0, first) << at;
      ASSERT_LE(last, bucket.elements) << at;
      for (std::int64_t i = first; i < last; ++i) ++owned_count[bucket.begin + i];
    }
  }
  EXPECT_EQ(next_element, store.total_elements()) << where;
  // One rank of one tp group counts every element of the norm once.
  EXPECT_TRUE(std::all_of(owned_count.begin(), owned_count.end(), [](int n) { return n == 1; }))
      << where;
}

TEST(BucketLayout, EverySizeDpAndStageMeetsTheOracle) {
  for (const schemas::ModelConfig& model :
       {testing::odd_gpt(3, false), testing::odd_gpt(3, true), schemas::model_preset("llama-tiny"),
        schemas::model_preset("moe-tiny")}) {
    const ParameterStore store(transformer_parameters(model), ScalarType::float32);
    std::vector<std::int64_t> sizes = {1,
                                       2,
                                       7,
                                       store.total_elements() / 5,
                                       store.total_elements() / 2,
                                       store.total_elements(),
                                       store.total_elements() + 1,
                                       40'000'000};
    // Each unit's size and one past it: the boundaries where a bucket closes or does not.
    for (const auto& [begin, end] : unit_ranges(model, store)) {
      sizes.push_back(end - begin);
      sizes.push_back(end - begin + 1);
    }
    for (std::int64_t zero_stage = 0; zero_stage <= 3; ++zero_stage) {
      for (std::int64_t dp : {1, 2, 3, 5, 8}) {
        for (std::int64_t size : sizes) {
          expect_layout_holds(
              model, store, {.rule = {.zero_stage = zero_stage, .bucket_elements = size, .dp = dp}},
              model.name + (model.tied_embeddings ? " tied" : "") + ", ZeRO-" +
                  std::to_string(zero_stage) + ", dp " + std::to_string(dp) + ", buckets of " +
                  std::to_string(size));
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

// Expert parallelism cuts each bucket where the routed experts (the stacked tensors named
// layers.N.mlp.experts.*) begin and end: the pieces tile the buckets the same options make without
// it, each holds routed experts only or none, consecutive pieces of one bucket differ, each is
// padded by the ranks that share it, and the norm still counts every element once.
TEST(BucketLayout, ExpertParallelismCutsBucketsAtTheRoutedExperts) {
  const schemas::ModelConfig model = schemas::model_preset("moe-tiny");
  for (std::int64_t ep : {1, 2}) {
    const ParameterStore store(
        transformer_parameters(model), ScalarType::float32, Device::cpu, std::nullopt,
        StoreOptions{.expert_parallel_rank = ep - 1, .expert_parallel_size = ep});
    const std::vector<int> unit_stage(static_cast<std::size_t>(parameter_unit_count(model)), 0);
    for (std::int64_t zero_stage = 0; zero_stage <= 3; ++zero_stage) {
      for (std::int64_t size : {std::int64_t{1}, std::int64_t{50'000}, store.total_elements()}) {
        const BucketLayoutOptions together{
            .rule = {.zero_stage = zero_stage, .bucket_elements = size, .dp = 3}};
        BucketLayoutOptions apart = together;
        apart.rule.expert_dp = 2;
        const std::vector<BucketRange> whole = bucket_layout(model, store, unit_stage, together);
        const std::vector<BucketRange> pieces = bucket_layout(model, store, unit_stage, apart);
        const std::string where = "ep " + std::to_string(ep) + ", ZeRO-" +
                                  std::to_string(zero_stage) + ", buckets of " +
                                  std::to_string(size);
        ASSERT_GT(pieces.size(), whole.size()) << where;
        std::vector<int> owned_count(static_cast<std::size_t>(store.total_elements()), 0);
        std::size_t piece = 0;
        std::int64_t shard_offset = 0;
        for (const BucketRange& bucket : whole) {
          std::int64_t next = bucket.begin;
          std::optional<bool> previous_kind;
          while (next < bucket.begin + bucket.elements) {
            ASSERT_LT(piece, pieces.size()) << where;
            const BucketRange& cut = pieces[piece++];
            const std::string at = where + ", piece " + std::to_string(piece - 1);
            EXPECT_EQ(cut.begin, next) << at;
            next = cut.begin + cut.elements;
            EXPECT_NE(previous_kind, std::optional<bool>(cut.experts)) << at;
            previous_kind = cut.experts;
            const std::int64_t sharing = cut.experts ? 2 : 3;
            EXPECT_EQ(cut.padded, cut.shard * sharing) << at;
            EXPECT_LT(cut.padded - cut.elements, sharing) << at;
            EXPECT_EQ(cut.shard_offset, shard_offset) << at;
            shard_offset += cut.shard;
            std::int64_t covered = 0;
            for (std::size_t e : cut.entries) {
              const ParameterEntry& entry = store.entries()[e];
              EXPECT_EQ(entry.spec.name.find(".mlp.experts.") != std::string::npos, cut.experts)
                  << at << ", " << entry.spec.name;
              const std::int64_t unit = parameter_unit(model, entry.spec.name);
              EXPECT_LE(cut.first_unit, unit) << at;
              EXPECT_GE(cut.last_unit, unit) << at;
              covered += shape_numel(entry.shape);
            }
            EXPECT_EQ(covered, cut.elements) << at;
            for (const auto& [first, last] : cut.owned) {
              for (std::int64_t i = first; i < last; ++i) ++owned_count[cut.begin + i];
            }
          }
          EXPECT_EQ(next, bucket.begin + bucket.elements) << where;
        }
        EXPECT_EQ(piece, pieces.size()) << where;
        EXPECT_TRUE(std::all_of(owned_count.begin(), owned_count.end(), [](int n) {
          return n == 1;
        })) << where;
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace strata::executor
