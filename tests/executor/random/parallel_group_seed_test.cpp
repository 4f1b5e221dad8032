// The multi-dimensional randomizer against ATorch's table for 8 devices (tensor 2, data 2,
// pipeline 2, base 0): the seed of each "same along" set on every rank.
#include "strata/executor/random/parallel_group_seed.h"

#include <gtest/gtest.h>

#include <set>

namespace strata::executor {
namespace {

using schemas::MeshAxis;

TEST(ParallelGroupSeed, ReproducesTheEightDeviceTable) {
  const schemas::Mesh mesh{.tp = 2, .cp = 1, .dp = 2, .pp = 2};
  const std::vector<MeshAxis> axes{MeshAxis::tp, MeshAxis::dp, MeshAxis::pp};
  // Bit 0 tensor, bit 1 data, bit 2 pipeline.
  const std::vector<std::vector<std::uint64_t>> expected{
      {0, 1, 2, 3, 4, 5, 6, 7},          // ()
      {8, 8, 10, 10, 12, 12, 14, 14},    // (tensor)
      {16, 17, 16, 17, 20, 21, 20, 21},  // (data)
      {24, 24, 24, 24, 28, 28, 28, 28},  // (tensor, data)
      {32, 33, 34, 35, 32, 33, 34, 35},  // (pipeline)
      {40, 40, 42, 42, 40, 40, 42, 42},  // (tensor, pipeline)
      {48, 49, 48, 49, 48, 49, 48, 49},  // (data, pipeline)
      {56, 56, 56, 56, 56, 56, 56, 56},  // all three
  };
  for (std::uint32_t same = 0; same < 8; ++same) {
    for (std::int64_t rank = 0; rank < 8; ++rank) {
      EXPECT_EQ(parallel_group_seed(parallel_dimensions(mesh, rank, axes), same, 0),
                expected[same][static_cast<std::size_t>(rank)])
          << "same-mask " << same << " rank " << rank;
    }
  }
}

TEST(ParallelGroupSeed, RanksShareASeedExactlyWhenTheyDifferOnlyAlongTheSameGroups) {
  const schemas::Mesh mesh{.tp = 3, .cp = 1, .dp = 2, .pp = 4};
  const std::vector<MeshAxis> axes{MeshAxis::tp, MeshAxis::dp, MeshAxis::pp};
  std::set<std::uint64_t> all_seeds;
  for (std::uint32_t same = 0; same < 8; ++same) {
    std::set<std::uint64_t> seeds;
    for (std::int64_t rank = 0; rank < mesh.world_size(); ++rank) {
      seeds.insert(parallel_group_seed(parallel_dimensions(mesh, rank, axes), same, 1000));
    }
    std::int64_t distinct = mesh.world_size();
    for (std::size_t i = 0; i < axes.size(); ++i) {
      if (same & (1u << i)) distinct /= mesh.size_of(axes[i]);
    }
    EXPECT_EQ(static_cast<std::int64_t>(seeds.size()), distinct) << same;
    all_seeds.insert(seeds.begin(), seeds.end());
  }
  // No seed of one same-set is a seed of another.
  std::size_t total = 0;
  for (std::uint32_t same = 0; same < 8; ++same) {
    std::int64_t distinct = mesh.world_size();
    for (std::size_t i = 0; i < axes.size(); ++i) {
      if (same & (1u << i)) distinct /= mesh.size_of(axes[i]);
    }
    total += static_cast<std::size_t>(distinct);
  }
  EXPECT_EQ(all_seeds.size(), total);
}

}  // namespace
}  // namespace strata::executor
