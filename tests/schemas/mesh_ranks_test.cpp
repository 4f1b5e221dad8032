#include "strata/schemas/mesh_ranks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace strata::schemas {
namespace {

using Groups = std::vector<std::vector<std::int64_t>>;

// The groups collected by their members' other coordinates, each and all sorted.
Groups sorted_groups(std::map<std::vector<std::int64_t>, std::vector<std::int64_t>>& by_key) {
  Groups groups;
  for (auto& [key, group] : by_key) {
    std::sort(group.begin(), group.end());
    groups.push_back(group);
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

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
  return sorted_groups(by_other_coordinates);
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

// The expert mesh, against two oracles. With pp slowest (Megatron's default order), Megatron-Core
// builds its expert groups with a second RankGenerator over (etp, ep, edp, pp) in that order: the
// nested-loop oracle above on a mesh whose tp, cp, dp stand for etp, ep, edp.
Groups megatron_expert_groups(const Mesh& mesh, const std::vector<ExpertAxis>& mask) {
  const Mesh expert_mesh{
      .tp = mesh.etp, .cp = mesh.ep, .dp = mesh.expert_dp(), .pp = mesh.pp, .vpp = 1};
  std::vector<MeshAxis> as_mesh_axes;
  for (ExpertAxis axis : mask) as_mesh_axes.push_back(static_cast<MeshAxis>(axis));
  return oracle_groups(expert_mesh, as_mesh_axes);
}

// For any order: number the ranks with nested loops, list each stage's ranks in increasing rank
// order, and split a rank's position in that list into etp, ep and edp indices, the first
// fastest.
Groups stage_sorting_expert_groups(const Mesh& mesh, const std::vector<ExpertAxis>& mask) {
  std::map<std::int64_t, std::vector<std::int64_t>> stages;  // by pp coordinate
  for (const std::vector<std::int64_t>& pipeline : oracle_groups(mesh, MeshAxis::pp)) {
    for (std::size_t stage = 0; stage < pipeline.size(); ++stage) {
      stages[static_cast<std::int64_t>(stage)].push_back(pipeline[stage]);
    }
  }
  std::map<std::vector<std::int64_t>, std::vector<std::int64_t>> by_other_coordinates;
  for (auto& [stage, ranks] : stages) {
    std::sort(ranks.begin(), ranks.end());
    for (std::size_t index = 0; index < ranks.size(); ++index) {
      const std::int64_t i = static_cast<std::int64_t>(index);
      const std::array<std::int64_t, 4> coordinates{i % mesh.etp, i / mesh.etp % mesh.ep,
                                                    i / (mesh.etp * mesh.ep), stage};
      std::vector<std::int64_t> others;
      for (std::size_t a = 0; a < 4; ++a) {
        const bool masked =
            std::find(mask.begin(), mask.end(), static_cast<ExpertAxis>(a)) != mask.end();
        others.push_back(masked ? -1 : coordinates[a]);
      }
      by_other_coordinates[others].push_back(ranks[index]);
    }
  }
  return sorted_groups(by_other_coordinates);
}

Groups sorted_expert_groups(const Mesh& mesh, std::initializer_list<ExpertAxis> mask) {
  Groups groups = expert_groups(mesh, mask);
  std::sort(groups.begin(), groups.end());
  return groups;
}

// 16 GPUs, tp 2, dp 4, pp 2, ep 4: a stage's eight ranks hold the experts in four ep shards of two
// replicas; the attention's tp pairs sit inside the ep groups.
TEST(ExpertMesh, FoldsExpertParallelismOverTheStagesRanks) {
  const Mesh mesh{.tp = 2, .cp = 1, .dp = 4, .pp = 2, .ep = 4};
  EXPECT_EQ(mesh.expert_dp(), 2);
  EXPECT_EQ(expert_groups(mesh, {ExpertAxis::ep}),
            (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(expert_groups(mesh, {ExpertAxis::edp}),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(expert_coordinates(mesh, 13), (ExpertCoordinates{0, 1, 1, 1}));
  // etp 2: each expert's MLP split over the pairs, the ep groups stride by 2.
  const Mesh with_etp{.tp = 2, .cp = 1, .dp = 4, .pp = 2, .ep = 2, .etp = 2};
  EXPECT_EQ(expert_group_of(with_etp, {ExpertAxis::etp}, 5), (std::vector<std::int64_t>{4, 5}));
  EXPECT_EQ(expert_group_of(with_etp, {ExpertAxis::ep}, 5), (std::vector<std::int64_t>{5, 7}));
  EXPECT_EQ(expert_group_of(with_etp, {ExpertAxis::edp}, 5), (std::vector<std::int64_t>{1, 5}));
  EXPECT_EQ(expert_group_of(with_etp, {ExpertAxis::pp}, 5), (std::vector<std::int64_t>{5, 13}));
}

TEST(ExpertMesh, AgreesWithMegatronsExpertRankGeneratorInTheDefaultOrder) {
  const std::vector<std::vector<ExpertAxis>> masks{{ExpertAxis::etp},
                                                   {ExpertAxis::ep},
                                                   {ExpertAxis::edp},
                                                   {ExpertAxis::pp},
                                                   {ExpertAxis::etp, ExpertAxis::ep},
                                                   {ExpertAxis::ep, ExpertAxis::edp}};
  for (const Mesh& mesh : {Mesh{.tp = 2, .cp = 2, .dp = 4, .pp = 2, .ep = 8},
                           Mesh{.tp = 4, .cp = 1, .dp = 4, .pp = 3, .ep = 2, .etp = 2},
                           Mesh{.tp = 1, .cp = 1, .dp = 8, .pp = 2, .ep = 4, .etp = 2},
                           Mesh{.tp = 2, .cp = 1, .dp = 3, .pp = 1, .ep = 3}}) {
    for (const std::vector<ExpertAxis>& mask : masks) {
      Groups groups;
      for (std::int64_t rank = 0; rank < mesh.world_size(); ++rank) {
        std::vector<std::int64_t> group;
        if (mask.size() == 1) group = expert_group_of(mesh, {mask[0]}, rank);
        if (mask.size() == 2) group = expert_group_of(mesh, {mask[0], mask[1]}, rank);
        if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
      }
      std::sort(groups.begin(), groups.end());
      EXPECT_EQ(groups, megatron_expert_groups(mesh, mask))
          << "ep " << mesh.ep << " etp " << mesh.etp << " mask size " << mask.size();
    }
  }
}

TEST(ExpertMesh, EveryOrderAgreesWithTheStageSortingOracle) {
  std::array<MeshAxis, 4> order{MeshAxis::tp, MeshAxis::cp, MeshAxis::dp, MeshAxis::pp};
  std::sort(order.begin(), order.end());
  do {
    const Mesh mesh{
        .tp = 2, .cp = 2, .dp = 3, .pp = 2, .vpp = 1, .order = order, .ep = 3, .etp = 2};
    for (ExpertAxis axis : {ExpertAxis::etp, ExpertAxis::ep, ExpertAxis::edp, ExpertAxis::pp}) {
      EXPECT_EQ(sorted_expert_groups(mesh, {axis}), stage_sorting_expert_groups(mesh, {axis}))
          << mesh_order_to_string(order);
    }
    EXPECT_EQ(sorted_expert_groups(mesh, {ExpertAxis::ep, ExpertAxis::edp}),
              stage_sorting_expert_groups(mesh, {ExpertAxis::ep, ExpertAxis::edp}));
  } while (std::next_permutation(order.begin(), order.end()));
}

// With ep·etp = tp·cp the experts of a stage fold exactly over the attention's tp × cp groups,
// and the expert data-parallel groups are the attention's dp groups.
TEST(ExpertMesh, ExpertsOverTensorAndContextRanksReuseTheAttentionsGroups) {
  const Mesh mesh{.tp = 2, .cp = 2, .dp = 2, .pp = 2, .ep = 2, .etp = 2};
  EXPECT_EQ(sorted_expert_groups(mesh, {ExpertAxis::etp, ExpertAxis::ep}),
            oracle_groups(mesh, {MeshAxis::tp, MeshAxis::cp}));
  EXPECT_EQ(sorted_expert_groups(mesh, {ExpertAxis::edp}), oracle_groups(mesh, MeshAxis::dp));
  EXPECT_EQ(sorted_expert_groups(mesh, {ExpertAxis::etp}), oracle_groups(mesh, MeshAxis::tp));
}

// Hybrid sharding splits the expert data-parallel group into the dense state's replicas.
TEST(ExpertMesh, ZeroShardsExpertStateOverBlocksOfTheExpertDataParallelGroup) {
  const Mesh mesh{.tp = 1, .cp = 1, .dp = 8, .pp = 1, .dp_shard = 4, .ep = 2};
  EXPECT_EQ(mesh.expert_dp(), 4);
  EXPECT_EQ(mesh.expert_zero_shards(), 2);
  EXPECT_EQ(expert_group_of(mesh, {ExpertAxis::edp}, 3), (std::vector<std::int64_t>{1, 3, 5, 7}));
  EXPECT_EQ(expert_zero_shard_group_of(mesh, 3), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(expert_zero_shard_group_of(mesh, 6), (std::vector<std::int64_t>{4, 6}));
  const Mesh full{.tp = 1, .cp = 1, .dp = 8, .pp = 1, .ep = 2};
  EXPECT_EQ(expert_zero_shard_group_of(full, 3), (std::vector<std::int64_t>{1, 3, 5, 7}));
}

// In every order, a rank's expert ZeRO shard group is the members of its expert data-parallel
// group whose edp coordinate falls in its block of expert_zero_shards() (the definition, checked
// by scanning every rank's coordinates; the function builds the group from its own), and its
// replica group the members at the same place in the other blocks.
TEST(ExpertMesh, ZeroShardGroupsAreTheBlocksOfTheExpertDataParallelGroupInEveryOrder) {
  std::array<MeshAxis, 4> order{MeshAxis::tp, MeshAxis::cp, MeshAxis::dp, MeshAxis::pp};
  std::sort(order.begin(), order.end());
  do {
    const Mesh mesh{.tp = 2,
                    .cp = 1,
                    .dp = 8,
                    .pp = 2,
                    .vpp = 1,
                    .order = order,
                    .dp_shard = 4,
                    .ep = 2,
                    .etp = 2};
    ASSERT_EQ(mesh.expert_zero_shards(), 2);
    // Same shard group: the same etp, ep and pp coordinates, and the same block of edp.
    const auto shard_key = [&](std::int64_t rank) {
      ExpertCoordinates key = expert_coordinates(mesh, rank);
      key[static_cast<std::size_t>(ExpertAxis::edp)] /= mesh.expert_zero_shards();
      return key;
    };
    for (std::int64_t rank = 0; rank < mesh.world_size(); ++rank) {
      std::vector<std::int64_t> scanned;
      for (std::int64_t member = 0; member < mesh.world_size(); ++member) {
        if (shard_key(member) == shard_key(rank)) scanned.push_back(member);
      }
      EXPECT_EQ(expert_zero_shard_group_of(mesh, rank), scanned)
          << mesh_order_to_string(order) << " rank " << rank;
      // Its replicas: the same etp, ep and pp coordinates, the same place within a block.
      const ExpertCoordinates own = expert_coordinates(mesh, rank);
      std::vector<std::int64_t> replicas;
      for (std::int64_t member = 0; member < mesh.world_size(); ++member) {
        ExpertCoordinates other = expert_coordinates(mesh, member);
        const auto edp = static_cast<std::size_t>(ExpertAxis::edp);
        if (other[edp] % mesh.expert_zero_shards() != own[edp] % mesh.expert_zero_shards())
          continue;
        other[edp] = own[edp];
        if (other == own) replicas.push_back(member);
      }
      EXPECT_EQ(expert_zero_replica_group_of(mesh, rank), replicas)
          << mesh_order_to_string(order) << " rank " << rank;
      EXPECT_EQ(expert_zero_shard_rank(mesh, rank),
                std::find(scanned.begin(), scanned.end(), rank) - scanned.begin());
      EXPECT_EQ(expert_zero_replica_rank(mesh, rank),
                std::find(replicas.begin(), replicas.end(), rank) - replicas.begin());
    }
  } while (std::next_permutation(order.begin(), order.end()));
}

}  // namespace
}  // namespace strata::schemas
