#include "strata/costmodels/collective_time.h"

#include <gtest/gtest.h>

#include <optional>

#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

// Two tiers with round numbers: 8-GPU NVLink domains at 300 GB/s and a fabric at 25 GB/s per GPU,
// full efficiency and no latency unless a test sets one.
schemas::ClusterConfig two_tier_cluster(std::int64_t nodes) {
  schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-a100-80gb");
  cluster.nodes = nodes;
  cluster.network_tiers = {{"nvlink", 8, 300, 0, 1, {}, {}, {}},
                           {"fabric", 8 * nodes, 25, 0, 1, {}, {}, {}}};
  return cluster;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A 1 GiB ring all-reduce over the 8 GPUs of one node at 300 GB/s bus bandwidth moves
// 2·(8−1)/8 = 1.75 GiB per GPU: 1.75 × 1,073,741,824 / 300e9 = 6.2634e-3 s.
TEST(CollectiveTime, OneGibRingAllReduceOverEightGpus) {
  const schemas::ClusterConfig cluster = two_tier_cluster(1);
  const GroupSpan span = group_span(cluster, {0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_EQ(span.levels.size(), 1u);
  EXPECT_EQ(span.levels[0].fan_out, 8);
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_reduce, kGiB), 6.2634e-3, 1e-7);
  // All-gather and reduce-scatter move half of that: (8−1)/8 × 1 GiB / 300 GB/s.
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_gather, kGiB), 3.1317e-3, 1e-7);
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::reduce_scatter, kGiB), 3.1317e-3, 1e-7);
}

// With 3 µs per step a ring pays 2·7 = 14 latencies (42 µs) and a tree 2·⌈log₂ 8⌉ = 6 (18 µs):
// NCCL takes the tree, and so do we.
TEST(CollectiveTime, LatencyPicksTheCheaperAlgorithm) {
  schemas::ClusterConfig cluster = two_tier_cluster(1);
  cluster.network_tiers[0].latency_us = 3;
  const GroupSpan span = group_span(cluster, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_reduce, kGiB), 6.2634e-3 + 18e-6,
              1e-7);
}

// NCCL's three protocols on an 8-GPU NVLink node at 300 GB/s (its tuner's constants for NVLink:
// base latency once, hop latency per ring step or tree hop; LL carries half the bandwidth, at
// most 87.7 GB/s; LL128 0.92 of it). Inside a node NCCL's tree is a chain, 2 × 7 hops.
//   all-reduce of 256 KiB: volume 2·7/8·262,144 = 458,752 B
//     LL      ring 6.6 + 14 × 0.6 = 15.0 µs, tree 6.6 + 14 × 0.6 = 15.0 µs; + 458,752 / 87.7e9
//             = 5.2309 µs → 20.2309 µs (the cheapest)
//     LL128   ring 14 + 14 × 1.9 = 40.6, tree 14 + 14 × 1.25 = 31.5; + 1.6621 → 33.16 µs
//     Simple  ring 8.4 + 14 × 3.4 = 56.0, tree 8.4 + 14 × 4 = 64.4; + 1.5292 → 57.53 µs
//   all-reduce of 64 MiB: volume 117,440,512 B; Simple's ring 56 µs + 391.468 µs = 447.468 µs
//     beats LL128's tree (31.5 + 425.509) = 457.009 µs and LL (15 + 1,339.12) µs
//   all-gather of 1 MiB (no tree): volume 7/8 · 1,048,576 = 917,504 B; LL 6.6 + 7 × 0.6 + 10.4618
//     = 21.2618 µs; LL128 14 + 13.3 + 3.3243 = 30.62; Simple 8.4 + 23.8 + 3.0583 = 35.26
TEST(CollectiveTime, ProtocolsTradeLatencyForBandwidthAsNcclsTunerDoes) {
  schemas::ClusterConfig cluster = two_tier_cluster(1);
  cluster.network_tiers[0].protocols = {{"ll", 6.6, 0.6, 0.6, 0.5, 87.7},
                                        {"ll128", 14.0, 1.9, 1.25, 0.92, std::nullopt},
                                        {"simple", 8.4, 3.4, 4.0, 1.0, std::nullopt}};
  const GroupSpan span = group_span(cluster, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_reduce, 262144),
              15.0e-6 + 458752 / 87.7e9, 1e-12);
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_reduce, 64 * 1048576.0),
              56.0e-6 + 117440512 / 300e9, 1e-12);
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_gather, 1048576),
              10.8e-6 + 917504 / 87.7e9, 1e-12);
  // Without protocols the same tier pays its latency per step: here none, so only bandwidth.
  cluster.network_tiers[0].protocols.clear();
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_gather, 1048576), 917504 / 300e9,
              1e-12);
}

// Between nodes NCCL's tree is binary: an all-reduce over 8 nodes of one GPU each (fabric at
// 25 GB/s, Simple only: base 8.4 µs, 14 µs per ring step or tree hop) takes the tree's
// 2 × ⌈log₂ 8⌉ = 6 hops (8.4 + 84 µs) rather than the ring's 14 (8.4 + 196 µs), plus the volume
// 2·7/8·1 MiB over 25 GB/s = 73.4003 µs.
TEST(CollectiveTime, BetweenNodesTheTreeIsBinary) {
  schemas::ClusterConfig cluster = two_tier_cluster(8);
  cluster.network_tiers[1].protocols = {{"simple", 8.4, 14.0, 14.0, 1.0, std::nullopt}};
  const GroupSpan span = group_span(cluster, {0, 8, 16, 24, 32, 40, 48, 56});
  ASSERT_EQ(span.levels.size(), 1u);
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_reduce, 1048576),
              92.4e-6 + 1.75 * 1048576 / 25e9, 1e-12);
}

// 16 GPUs on two nodes: reduce-scatter and all-gather inside each node (2 × 7/8 × S / 300 GB/s)
// around an all-reduce of each GPU's S/8 shard between the nodes (2 × 1/2 × S/8 / 25 GB/s).
TEST(CollectiveTime, GroupsAcrossNodesReduceHierarchically) {
  const schemas::ClusterConfig cluster = two_tier_cluster(2);
  std::vector<std::int64_t> ranks(16);
  for (std::int64_t r = 0; r < 16; ++r) ranks[static_cast<std::size_t>(r)] = r;
  const GroupSpan span = group_span(cluster, ranks);
  ASSERT_EQ(span.levels.size(), 2u);
  EXPECT_EQ(span.levels[0].fan_out, 8);
  EXPECT_EQ(span.levels[1].fan_out, 2);
  const double bytes = 1e9;
  const double expected = 2 * 0.875 * bytes / 300e9 + 2 * 0.5 * (bytes / 8) / 25e9;
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_reduce, bytes), expected, 1e-9);

  // One GPU per node (a dp group when tp fills the node): all traffic on the fabric.
  const GroupSpan across = group_span(cluster, {0, 8});
  ASSERT_EQ(across.levels.size(), 1u);
  EXPECT_EQ(across.levels[0].tier, 1);
  EXPECT_NEAR(collective_time_s(cluster, across, Collective::all_reduce, bytes), bytes / 25e9,
              1e-9);
  EXPECT_EQ(tier_between(cluster, 3, 5), 0);
  EXPECT_EQ(tier_between(cluster, 3, 9), 1);
}

// NCCL has no tree for reduce-scatter and all-gather: a group spanning nodes runs them as rings,
// pipelined, paced by the slowest tier, whose boundary the members of a node cross over their
// own NICs. 1 GB over 8 members, 2 on each of 4 nodes: each ring link carries 7/8 GB; a node's
// 2 NICs carry it at 2 × 25 GB/s: 17.5 ms (NVLink: 7/8 GB at 300 GB/s = 2.9 ms, hidden).
// Reduced hierarchically it would take 1/2 GB / 300 GB/s + 3/4 × 1/2 GB / 25 GB/s = 16.7 ms.
// With 8 on each of 2 nodes, the 8 NICs pace the ring: 15/16 GB / 200 GB/s = 4.6875 ms; each of
// the 15 steps pays the slowest tier's latency.
TEST(CollectiveTime, ReduceScatterAndAllGatherAcrossNodesRunAsRings) {
  schemas::ClusterConfig cluster = two_tier_cluster(4);
  const GroupSpan pairs = group_span(cluster, {0, 1, 8, 9, 16, 17, 24, 25});
  ASSERT_EQ(pairs.levels.size(), 2u);
  const double bytes = 1e9;
  EXPECT_NEAR(collective_time_s(cluster, pairs, Collective::reduce_scatter, bytes), 17.5e-3, 1e-9);
  EXPECT_NEAR(collective_time_s(cluster, pairs, Collective::all_gather, bytes), 17.5e-3, 1e-9);

  std::vector<std::int64_t> two_nodes(16);
  for (std::int64_t r = 0; r < 16; ++r) two_nodes[static_cast<std::size_t>(r)] = r;
  cluster.network_tiers[0].latency_us = 3;
  cluster.network_tiers[1].latency_us = 6;
  EXPECT_NEAR(
      collective_time_s(cluster, group_span(cluster, two_nodes), Collective::reduce_scatter, bytes),
      4.6875e-3 + 15 * 6e-6, 1e-9);
}

// The mesh order decides which tier a group spans: tp first keeps tp inside a node; dp first
// spreads tp across nodes.
TEST(CollectiveTime, MeshOrderDecidesTheTier) {
  const schemas::ClusterConfig cluster = two_tier_cluster(2);
  schemas::Mesh mesh;
  mesh.tp = 8;
  mesh.dp = 2;
  EXPECT_EQ(group_span(cluster, first_group_ranks(mesh, {schemas::MeshAxis::tp})).outermost_tier(),
            0);
  mesh.order = {schemas::MeshAxis::dp, schemas::MeshAxis::tp, schemas::MeshAxis::cp,
                schemas::MeshAxis::pp};
  const std::vector<std::int64_t> tp_group = first_group_ranks(mesh, {schemas::MeshAxis::tp});
  EXPECT_EQ(tp_group, (std::vector<std::int64_t>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_EQ(group_span(cluster, tp_group).outermost_tier(), 1);
}

TEST(CollectiveTime, PointToPointIsLatencyPlusBytesOverBandwidth) {
  schemas::ClusterConfig cluster = two_tier_cluster(2);
  cluster.network_tiers[1].latency_us = 6;
  EXPECT_NEAR(point_to_point_time_s(cluster, 1, 25e6), 6e-6 + 1e-3, 1e-12);
  EXPECT_EQ(point_to_point_time_s(cluster, 1, 0), 0);
}

// A measured curve for one collective prices that collective alone. The NVLink tier runs
// reduce-scatter at a quarter of its bandwidth and send/receive at a half: 1 GB over 8 members
// reduce-scatters in 7/8 GB / 75 GB/s, all-gather keeps the tier's 300 GB/s, a message of 1 GB
// takes 1/150 s. Across two nodes an all-reduce's inner levels are a reduce-scatter and an
// all-gather, each on its own curve: 7/8 GB / 75 GB/s + 7/8 GB / 300 GB/s + the fabric's part.
TEST(CollectiveTime, AMeasuredCurvePricesItsOwnCollective) {
  schemas::ClusterConfig cluster = two_tier_cluster(2);
  cluster.network_tiers[0].efficiency_by_collective = {
      {schemas::TierCollective::reduce_scatter, {{1e3, 0.25}}},
      {schemas::TierCollective::send_receive, {{1e3, 0.5}}}};
  const GroupSpan node = group_span(cluster, {0, 1, 2, 3, 4, 5, 6, 7});
  const double bytes = 1e9;
  EXPECT_NEAR(collective_time_s(cluster, node, Collective::reduce_scatter, bytes),
              0.875 * bytes / 75e9, 1e-12);
  EXPECT_NEAR(collective_time_s(cluster, node, Collective::all_gather, bytes),
              0.875 * bytes / 300e9, 1e-12);
  EXPECT_NEAR(point_to_point_time_s(cluster, 0, bytes), bytes / 150e9, 1e-12);
  std::vector<std::int64_t> ranks(16);
  for (std::int64_t r = 0; r < 16; ++r) ranks[static_cast<std::size_t>(r)] = r;
  const double across = 2 * 0.5 * (bytes / 8) / 25e9;
  EXPECT_NEAR(collective_time_s(cluster, group_span(cluster, ranks), Collective::all_reduce, bytes),
              0.875 * bytes / 75e9 + 0.875 * bytes / 300e9 + across, 1e-12);
}

// The gradient buckets' non-blocking all-reduce: priced by its own curve where the tier measured
// one (Open MPI's libnbc at 0.4 of the bus bandwidth), else by the blocking all-reduce's curve
// (0.8), else as the tier prices any all-reduce. 1 GB over the 8 members of one NVLink node.
TEST(CollectiveTime, TheNonBlockingAllReduceFallsBackToTheBlockingOnesCurve) {
  schemas::ClusterConfig cluster = two_tier_cluster(2);
  const GroupSpan node = group_span(cluster, {0, 1, 2, 3, 4, 5, 6, 7});
  const double bytes = 1e9;
  const double at_full_s = 2 * 0.875 * bytes / 300e9;
  EXPECT_NEAR(collective_time_s(cluster, node, Collective::all_reduce_non_blocking, bytes),
              collective_time_s(cluster, node, Collective::all_reduce, bytes), 1e-15);
  schemas::NetworkTier& nvlink = cluster.network_tiers[0];
  nvlink.efficiency_by_collective = {{schemas::TierCollective::all_reduce, {{1e3, 0.8}}}};
  EXPECT_NEAR(collective_time_s(cluster, node, Collective::all_reduce_non_blocking, bytes),
              at_full_s / 0.8, 1e-12);
  nvlink.efficiency_by_collective[schemas::TierCollective::all_reduce_non_blocking] = {{1e3, 0.4}};
  EXPECT_NEAR(collective_time_s(cluster, node, Collective::all_reduce_non_blocking, bytes),
              at_full_s / 0.4, 1e-12);
  EXPECT_NEAR(collective_time_s(cluster, node, Collective::all_reduce, bytes), at_full_s / 0.8,
              1e-12);
}

// An all-to-all over 32 GPUs of four nodes: each sends S/32 to every member, 7/32 of S over its
// node's NVLink and 24/32 over the fabric, at once; the fabric's share is the longer:
// 24/32 × 1 GiB / 25 GB/s = 32.212e-3 s (NVLink's 7/32 × 1 GiB / 300 GB/s is 0.78e-3 s), plus
// the fabric's latency.
TEST(CollectiveTime, AllToAllAcrossNodesIsBoundByTheFabricsShare) {
  schemas::ClusterConfig cluster = two_tier_cluster(4);
  cluster.network_tiers[1].latency_us = 5;
  std::vector<std::int64_t> ranks(32);
  for (std::int64_t r = 0; r < 32; ++r) ranks[static_cast<std::size_t>(r)] = r;
  const GroupSpan span = group_span(cluster, ranks);
  EXPECT_NEAR(collective_time_s(cluster, span, Collective::all_to_all, kGiB),
              24.0 / 32.0 * kGiB / 25e9 + 5e-6, 1e-9);
  // Inside one node it is all-gather's volume: 7/8 × S over NVLink.
  const GroupSpan node = group_span(cluster, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_NEAR(collective_time_s(cluster, node, Collective::all_to_all, kGiB),
              7.0 / 8.0 * kGiB / 300e9, 1e-9);
}

}  // namespace
}  // namespace strata::costmodels
