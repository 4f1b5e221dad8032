// Time of NCCL collectives and point-to-point transfers on a cluster's network tiers.
//
// Conventions are nccl-tests': for a buffer of S bytes over n ranks at bus bandwidth B,
//   all-reduce      t = 2(n−1)/n · S / B      (ring: reduce-scatter then all-gather)
//   all-gather      t =  (n−1)/n · S / B      (S is the gathered, whole buffer)
//   reduce-scatter  t =  (n−1)/n · S / B      (S is the whole input buffer)
//   broadcast       t =            S / B      (pipelined ring or tree)
//   all-to-all      t =  (n−1)/n · S / B
//   send/recv       t =            S / B
// plus a start-up latency: ring algorithms pay it once per step (2(n−1) steps for all-reduce,
// n−1 for the others), trees 2·⌈log₂ n⌉ times; NCCL picks the faster, and so do we.
//
// An all-reduce over a group spanning several tiers is reduced hierarchically, tier by tier from
// the inside out: with n₀ members per innermost domain and n₁ domains, a reduce-scatter over n₀
// on the fast tier, an all-reduce of S/n₀ over n₁ on the slow tier (each member using its own
// NIC, so the n₀ sub-rings run side by side), and an all-gather over n₀. This is what NCCL's
// NVLS/tree and hierarchical rings achieve on DGX-class nodes with one NIC per GPU.
// An all-to-all across tiers sends each tier the share of S bound for members beyond the domain
// below it, all tiers at once: t = max over tiers of S·(members inside the tier's domain −
// members inside the one below)/n / B of the tier, plus one latency.
// Reduce-scatter and all-gather have no tree in NCCL: across tiers they run as one pipelined
// ring, t = (n−1)/n · S / min over tiers of (members per domain below it × B of the tier), and
// each of the n−1 steps pays the slowest tier's latency.
//
// A tier's bandwidth is scaled by an efficiency by message size: the collective's own measured
// curve where the tier has one (`strata profile` writes one per collective: an MPI communicator's
// algorithms differ from NCCL's and from each other), else the tier's. Broadcast and all-to-all
// use all-gather's; a hierarchical all-reduce's inner levels use reduce-scatter's and
// all-gather's.
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/plan.h"

namespace strata::costmodels {

// all_reduce_non_blocking: the all-reduce as data-parallel gradient buckets issue it, started
// and waited for later. The same algorithm; a tier that measured it on its own (Open MPI's
// libnbc runs slower than its blocking all-reduce) prices it by that curve, others as all_reduce.
enum class Collective {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  all_to_all,
  all_reduce_non_blocking
};

// How a group of ranks sits on the network: for each tier it crosses, the number of members that
// tier connects (the fan-out at that level). A group inside one NVLink domain has one level;
// a tp group of 8 across two 4-GPU nodes has {4 on nvlink, 2 on the fabric}.
struct TierSpan {
  int tier = 0;  // index into ClusterConfig::network_tiers
  std::int64_t fan_out = 1;
  auto operator<=>(const TierSpan&) const = default;
};
struct GroupSpan {
  std::int64_t size = 1;
  std::vector<TierSpan> levels;  // inside out; empty for a group of one
  int outermost_tier() const { return levels.empty() ? 0 : levels.back().tier; }
  auto operator<=>(const GroupSpan&) const = default;
};

// Members must be distinct world ranks. Tier i's domains are runs of scope_gpus consecutive ranks.
GroupSpan group_span(const schemas::ClusterConfig& cluster, const std::vector<std::int64_t>& ranks);

// The group of rank 0 along the given mesh axes (e.g. {dp, cp} for gradient reduction). Groups
// along the same axes are translates of one another, so one span serves all of them.
std::vector<std::int64_t> first_group_ranks(const schemas::Mesh& mesh,
                                            const std::vector<schemas::MeshAxis>& axes);

double collective_time_s(const schemas::ClusterConfig& cluster, const GroupSpan& span,
                         Collective collective, double bytes);

// One message between two ranks whose nearest common domain is `tier`.
double point_to_point_time_s(const schemas::ClusterConfig& cluster, int tier, double bytes);

// The tier joining two ranks: the innermost whose domain holds both.
int tier_between(const schemas::ClusterConfig& cluster, std::int64_t rank_a, std::int64_t rank_b);

}  // namespace strata::costmodels
