// Placements and the model's placement table: which slice of each parameter a tensor-parallel
// rank holds, and that the slice a rank initialises on its own is, element for element, the slice
// of the one-device tensor — for every parameter, with kv heads replicated when tp exceeds them
// and a vocabulary that tp does not divide.
#include "strata/layout/placement.h"

#include <gtest/gtest.h>

#include <map>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/model/transformer.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

TEST(Placement, SplitsEvenlyByBlocksReplicatesFewBlocksAndSplitsOddCountsUnevenly) {
  // 8 heads of 4 rows over 4 ranks: two heads each.
  const Placement heads = Placement::shard(0, {{8, 4}});
  const std::vector<DimensionInterval> third = shard_intervals(heads, 32, 2, 4);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].global_start, 16);
  EXPECT_EQ(third[0].length, 8);
  EXPECT_EQ(third[0].replicas, 1);
  // 2 kv heads over 4 ranks: each on two neighbouring ranks.
  const Placement kv = Placement::shard(0, {{2, 4}});
  EXPECT_EQ(shard_intervals(kv, 8, 1, 4)[0].global_start, 0);
  EXPECT_EQ(shard_intervals(kv, 8, 2, 4)[0].global_start, 4);
  EXPECT_EQ(shard_intervals(kv, 8, 3, 4)[0].replicas, 2);
  EXPECT_EQ(shard_intervals(kv, 8, 3, 4)[0].replica_index, 1);
  // 50,257 vocabulary rows over 4 ranks: 12,564, 12,564, 12,564 and 12,565, covering all.
  const Placement rows = Placement::shard(0);
  std::int64_t next = 0;
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    const std::vector<DimensionInterval> mine = shard_intervals(rows, 50257, rank, 4);
    ASSERT_EQ(mine.size(), 1u);
    EXPECT_EQ(mine[0].global_start, next);
    EXPECT_GE(mine[0].length, 12564);
    EXPECT_LE(mine[0].length, 12565);
    next += mine[0].length;
  }
  EXPECT_EQ(next, 50257);
  // Columns of a [3, 8] row-parallel weight over 2 ranks: one run per row.
  const std::vector<ElementRun> runs = local_element_runs({3, 8}, Placement::shard(1), 1, 2);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].global_offset, 12);
  EXPECT_EQ(runs[1].local_offset, 4);
  EXPECT_EQ(runs[1].length, 4);
  EXPECT_EQ(local_shape({3, 8}, Placement::shard(1), 1, 2), (Shape{3, 4}));
  EXPECT_EQ(local_element_runs({3, 8}, Placement::replicate(), 1, 2).size(), 1u);
}

// Every element of every parameter, on every rank, against the one-device tensor; and together
// the ranks hold each element once (a replicated block: by as many ranks as it has replicas).
void expect_shards_are_slices(const schemas::ModelConfig& model, std::int64_t tp) {
  const std::uint64_t seed = 2026;
  ParameterStore whole(transformer_parameters(model), ScalarType::float32);
  whole.initialize(seed);
  std::map<std::string, std::vector<int>> holders;
  for (std::int64_t rank = 0; rank < tp; ++rank) {
    ParameterStore slice(transformer_parameters(model), ScalarType::float32, Device::cpu,
                         std::nullopt, StoreOptions{rank, tp});
    slice.initialize(seed);
    for (const ParameterEntry& entry : slice.entries()) {
      const float* global = whole.entry(entry.spec.name).value.data<float>();
      const float* local = entry.value.data<float>();
      std::vector<int>& held = holders[entry.spec.name];
      held.resize(static_cast<std::size_t>(shape_numel(entry.spec.shape)));
      std::int64_t covered = 0;
      for (const ElementRun& run : entry.runs) {
        for (std::int64_t i = 0; i < run.length; ++i) {
          ASSERT_EQ(local[run.local_offset + i], global[run.global_offset + i])
              << model.name << " tp " << tp << " rank " << rank << " " << entry.spec.name;
          held[static_cast<std::size_t>(run.global_offset + i)] += run.replica_index == 0 ? 1 : 0;
        }
        covered += run.length;
      }
      EXPECT_EQ(covered, shape_numel(entry.shape)) << entry.spec.name;
      if (entry.spec.tensor_parallel.kind == PlacementKind::replicate) {
        EXPECT_EQ(entry.shape, entry.spec.shape) << entry.spec.name;
      }
    }
  }
  for (const auto& [name, held] : holders) {
    const ParameterEntry& entry = whole.entry(name);
    const int expected = entry.spec.tensor_parallel.kind == PlacementKind::shard
                             ? 1
                             : static_cast<int>(tp);  // replicated: every rank holds it
    for (std::size_t i = 0; i < held.size(); ++i) {
      ASSERT_EQ(held[i], expected) << name << " element " << i;
    }
  }
}

// Routed experts stacked [experts, width, hidden], split by ep along the experts and by etp along
// the width: every element is held by exactly one (ep, etp) rank, at the local index an index
// oracle gives, and the runs are the fewest contiguous pieces (a row of width/etp · hidden per
// held expert). The output projection [experts, hidden, width] is split along its last dimension.
TEST(Placement, TwoAxesSplitDifferentDimensionsOfOneTensor) {
  const Placement experts = Placement::shard(0);
  for (const auto& [width_dim, shape] :
       std::vector<std::pair<int, Shape>>{{1, {4, 6, 8}}, {2, {4, 8, 6}}}) {
    const Placement width = Placement::shard(width_dim);
    constexpr std::int64_t kEp = 2, kEtp = 3;
    std::vector<int> holders(static_cast<std::size_t>(shape_numel(shape)), 0);
    for (std::int64_t ep = 0; ep < kEp; ++ep) {
      for (std::int64_t etp = 0; etp < kEtp; ++etp) {
        const std::vector<AxisSplit> splits{{&experts, ep, kEp}, {&width, etp, kEtp}};
        Shape expected_local = shape;
        expected_local[0] /= kEp;
        expected_local[static_cast<std::size_t>(width_dim)] /= kEtp;
        EXPECT_EQ(local_shape(shape, splits), expected_local);
        const std::vector<ElementRun> runs = local_element_runs(shape, splits);
        // Contiguous pieces: one per (held expert, row above the width) for the output's split
        // of the last dimension, one per held expert when the width is the middle dimension.
        EXPECT_EQ(static_cast<std::int64_t>(runs.size()),
                  width_dim == 1 ? shape[0] / kEp : shape[0] / kEp * shape[1]);
        std::int64_t local = 0;
        for (const ElementRun& run : runs) {
          EXPECT_EQ(run.local_offset, local);
          local += run.length;
          for (std::int64_t i = 0; i < run.length; ++i) {
            const std::int64_t global = run.global_offset + i;
            const std::int64_t last = global % shape[2];
            const std::int64_t middle = global / shape[2] % shape[1];
            const std::int64_t expert = global / (shape[1] * shape[2]);
            const std::int64_t w = width_dim == 1 ? middle : last;
            const std::int64_t part = shape[static_cast<std::size_t>(width_dim)] / kEtp;
            EXPECT_EQ(expert / (shape[0] / kEp), ep);
            EXPECT_EQ(w / part, etp);
            // The oracle's local index: row-major over the held sub-block.
            const std::int64_t local_expert = expert % (shape[0] / kEp);
            const std::int64_t local_index =
                width_dim == 1 ? (local_expert * part + w % part) * shape[2] + last
                               : (local_expert * shape[1] + middle) * part + w % part;
            EXPECT_EQ(run.local_offset + i, local_index);
            ++holders[static_cast<std::size_t>(global)];
          }
        }
        EXPECT_EQ(local, shape_numel(expected_local));
      }
    }
    for (int count : holders) ASSERT_EQ(count, 1);
  }
}

TEST(Placement, EveryTensorParallelShardIsTheSliceOfTheOneDeviceTensor) {
  expect_shards_are_slices(schemas::model_preset("gpt-tiny"), 4);
  expect_shards_are_slices(schemas::model_preset("gpt-tiny"), 2);
  // 4 query heads and 2 kv heads over 4 ranks: each kv head on two ranks.
  expect_shards_are_slices(schemas::model_preset("llama-tiny"), 4);
  schemas::ModelConfig odd_vocabulary = schemas::model_preset("gpt-tiny");
  odd_vocabulary.vocab_size = 257;
  odd_vocabulary.tied_embeddings = false;
  expect_shards_are_slices(odd_vocabulary, 4);
}

TEST(Placement, TheTableSplitsWhatMegatronSplits) {
  const schemas::ModelConfig model = schemas::model_preset("llama-tiny");
  ParameterStore slice(transformer_parameters(model), ScalarType::float32, Device::cpu,
                       std::nullopt, StoreOptions{1, 2});
  // Column-parallel: output rows; row-parallel: input columns; norms whole.
  EXPECT_EQ(slice.entry("layers.0.mlp.gate.weight").shape, (Shape{344, 256}));
  EXPECT_EQ(slice.entry("layers.0.mlp.output.weight").shape, (Shape{256, 344}));
  EXPECT_EQ(slice.entry("layers.0.attention.output.weight").shape, (Shape{256, 128}));
  EXPECT_EQ(slice.entry("layers.0.attention_norm.weight").shape, (Shape{256}));
  // qkv: 2 of 4 query heads, 1 of 2 kv heads, for k and for v: 4 heads of 64 rows.
  EXPECT_EQ(slice.entry("layers.0.attention.qkv.weight").shape, (Shape{256, 256}));
  EXPECT_EQ(slice.entry("embedding.word").shape, (Shape{128, 256}));
  EXPECT_EQ(slice.entry("lm_head.weight").shape, (Shape{128, 256}));
}

}  // namespace
}  // namespace strata::executor
