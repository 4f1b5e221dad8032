#include "strata/schemas/mesh_ranks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace strata::schemas {
namespace {

using Groups = std::vector<std::vector<std::int64_t>>;

// An independent oracle, as Megatron-LM tests its RankGenerator: walk all coordinates with nested
// loops (slowest axis outermost), number the ranks in that order, and collect the ranks that agree
// on every coordinate outside the mask.
Groups oracle_groups(const Mesh& mesh, const std::vector<MeshAxis>& mask) {
  const std::array<MeshAxis, 4> order = mesh.order;
  std::map<std::vector<std::int64_t>, std::vector<std::int64_t>> by_other_coordinates;
  std::int64_t rank = 0;
  MeshCoordinates c{};
  auto& slowest = c[static_cast<std::size_t>(order[3])];
  auto& slow = c[static_cast<std::size_t>(order[2])];
  auto& fast = c[static_cast<std::size_t>(order[1])];
  auto& fastest = c[static_cast<std::size_t>(order[0])];
  for (slowest = 0; slowest < mesh.size_of(order[3]); ++slowest) {
    for (slow = 0; slow < mesh.size_of(order[2]); ++slow) {
      for (fast = 0; fast < mesh.size_of(order[1]); ++fast) {
        for (fastest = 0; fastest < mesh.size_of(order[0]); ++fastest) {
          std::vector<std::int64_t> others;
          for (std::size_t a = 0; a < 4; ++a) {
            const bool masked =
                std::find(mask.begin(), mask.end(), static_cast<MeshAxis>(a)) != mask.end();
            others.push_back(masked ? -1 : c[a]);
          }
          by_other_coordinates[others].push_back(rank++);
        }
      }
    }
  }
  Groups groups;
  for (auto& [key, group] : by_other_coordinates) {
    std::sort(group.begin(), group.end());
    groups.push_back(group);
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

Groups oracle_groups(const Mesh& mesh, MeshAxis axis) {
  return oracle_groups(mesh, std::vector<MeshAxis>{axis});
}

TEST(MeshRanks, TensorParallelGroupsAreNodesInMegatronsDefaultOrder) {
  const Mesh mesh{.tp = 8, .cp = 1, .dp = 2, .pp = 2};
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::tp)[1],
            (std::vector<std::int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::dp)[0], (std::vector<std::int64_t>{0, 8}));
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::pp)[3], (std::vector<std::int64_t>{3, 19}));
  EXPECT_EQ(axis_stride(mesh, MeshAxis::pp), 16);
  EXPECT_EQ(mesh_coordinates(mesh, 27), (MeshCoordinates{3, 0, 1, 1}));
}

TEST(MeshRanks, AgreesWithNestedLoopsForEveryOrder) {
  std::array<MeshAxis, 4> order{MeshAxis::tp, MeshAxis::cp, MeshAxis::dp, MeshAxis::pp};
  std::sort(order.begin(), order.end());
  do {
    const Mesh mesh{.tp = 4, .cp = 2, .dp = 3, .pp = 2, .vpp = 1, .order = order};
    for (MeshAxis axis : order) {
      Groups groups = mesh_groups(mesh, axis);
      EXPECT_EQ(groups.size(), static_cast<std::size_t>(mesh.world_size() / mesh.size_of(axis)));
      std::sort(groups.begin(), groups.end());
      EXPECT_EQ(groups, oracle_groups(mesh, axis)) << mesh_order_to_string(order);
    }
    for (std::int64_t rank = 0; rank < mesh.world_size(); ++rank) {
      EXPECT_EQ(mesh_rank(mesh, mesh_coordinates(mesh, rank)), rank);
    }
  } while (std::next_permutation(order.begin(), order.end()));
}

// Megatron-LM's documented example (parallel_state.initialize_model_parallel): 16 GPUs, tp=2,
// pp=4, hence dp=2, in the default order.
TEST(MeshRanks, ReproducesMegatronsSixteenGpuExample) {
  const Mesh mesh{.tp = 2, .cp = 1, .dp = 2, .pp = 4};
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::tp),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::dp),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::pp),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  // The model-parallel group (tp × pp) and the embedding groups of the same example.
  EXPECT_EQ(mesh_groups(mesh, {MeshAxis::tp, MeshAxis::pp}),
            (Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
  EXPECT_EQ(embedding_group_of(mesh, 5), (std::vector<std::int64_t>{1, 13}));
  EXPECT_EQ(embedding_group_of(mesh, 12), (std::vector<std::int64_t>{0, 12}));
  EXPECT_EQ(position_embedding_group_of(mesh, 14), (std::vector<std::int64_t>{2}));
}

// ATorch's example of its parallel groups: 8 devices, tensor 2, data 2, pipeline 2.
TEST(MeshRanks, ReproducesTheEightDeviceTensorDataPipelineExample) {
  const Mesh mesh{.tp = 2, .cp = 1, .dp = 2, .pp = 2};
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::tp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::dp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(mesh_groups(mesh, MeshAxis::pp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(mesh_group_of(mesh, {}, 6), (std::vector<std::int64_t>{6}));
  EXPECT_EQ(mesh_group_of(mesh, {MeshAxis::tp, MeshAxis::cp, MeshAxis::dp, MeshAxis::pp}, 3),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// Every mask (all 16 subsets of the axes) for random sizes and every order: the groups partition
// the ranks exactly as the nested-loop oracle does, and mesh_group_of finds each rank's own.
TEST(MeshRanks, EveryMaskAgreesWithTheOracleForRandomSizesAndOrders) {
  std::mt19937 random(20261123);
  std::uniform_int_distribution<std::int64_t> size(1, 4);
  for (int trial = 0; trial < 12; ++trial) {
    std::array<MeshAxis, 4> order{MeshAxis::tp, MeshAxis::cp, MeshAxis::dp, MeshAxis::pp};
    std::sort(order.begin(), order.end());
    const std::int64_t tp = size(random), cp = size(random), dp = size(random), pp = size(random);
    do {
      const Mesh mesh{.tp = tp, .cp = cp, .dp = dp, .pp = pp, .vpp = 1, .order = order};
      for (unsigned subset = 0; subset < 16; ++subset) {
        std::vector<MeshAxis> mask;
        for (unsigned a = 0; a < 4; ++a) {
          if (subset & (1u << a)) mask.push_back(static_cast<MeshAxis>(a));
        }
        Groups groups = mesh_groups(mesh, std::span<const MeshAxis>(mask));
        for (const std::vector<std::int64_t>& group : groups) {
          EXPECT_TRUE(std::is_sorted(group.begin(), group.end()));
          for (std::int64_t member : group) {
            EXPECT_EQ(mesh_group_of(mesh, std::span<const MeshAxis>(mask), member), group);
          }
        }
        std::sort(groups.begin(), groups.end());
        EXPECT_EQ(groups, oracle_groups(mesh, mask))
            << mesh_order_to_string(order) << " " << tp << "x" << cp << "x" << dp << "x" << pp
            << " mask " << subset;
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

}  // namespace
}  // namespace strata::schemas
