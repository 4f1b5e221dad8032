#include "strata/schemas/mesh_ranks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace strata::schemas {
namespace {

using Groups = std::vector<std::vector<std::int64_t>>;

// An independent oracle, as Megatron-LM tests its RankGenerator: walk all coordinates with nested
// loops (slowest axis outermost), number the ranks in that order, and collect the groups.
Groups oracle_groups(const Mesh& mesh, MeshAxis axis) {
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
          for (std::size_t a = 0; a < 4; ++a)
            others.push_back(a == static_cast<std::size_t>(axis) ? -1 : c[a]);
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

}  // namespace
}  // namespace strata::schemas
