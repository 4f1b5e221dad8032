#include "strata/costmodels/collective_time.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "strata/costmodels/kernel_time.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::costmodels {
namespace {

// Bus bandwidth of a tier in bytes/s for `collective`'s messages of `bytes` (per GPU, per
// direction): the collective's own measured curve where the tier has one (for the non-blocking
// all-reduce, else the blocking one's), else the tier's.
double bus_bandwidth_bytes_per_s(const schemas::NetworkTier& tier,
                                 schemas::TierCollective collective, double bytes) {
  auto measured = tier.efficiency_by_collective.find(collective);
  if (measured == tier.efficiency_by_collective.end() &&
      collective == schemas::TierCollective::all_reduce_non_blocking) {
    measured = tier.efficiency_by_collective.find(schemas::TierCollective::all_reduce);
  }
  const std::vector<schemas::EfficiencyPoint>& curve =
      measured != tier.efficiency_by_collective.end() ? measured->second
                                                      : tier.efficiency_by_message_bytes;
  const double efficiency = curve.empty() ? tier.efficiency : interpolate_efficiency(curve, bytes);
  return tier.bandwidth_gb_per_s * 1e9 * efficiency;
}

// The measured curve that prices `collective`: broadcast and all-to-all move data as an
// all-gather's ring does, without a reduction.
schemas::TierCollective measured_kind(Collective collective) {
  switch (collective) {
    case Collective::all_reduce:
      return schemas::TierCollective::all_reduce;
    case Collective::all_reduce_non_blocking:
      return schemas::TierCollective::all_reduce_non_blocking;
    case Collective::reduce_scatter:
      return schemas::TierCollective::reduce_scatter;
    case Collective::all_gather:
    case Collective::broadcast:
    case Collective::all_to_all:
      return schemas::TierCollective::all_gather;
  }
  return schemas::TierCollective::all_gather;
}

// A protocol's bus bandwidth on a tier: the tier's times the protocol's fraction, at most its cap.
double protocol_bandwidth_bytes_per_s(const schemas::TierProtocol& protocol, double bus) {
  const double bandwidth = bus * protocol.bandwidth_fraction;
  return protocol.max_bus_gb_per_s ? std::min(bandwidth, *protocol.max_bus_gb_per_s * 1e9)
                                   : bandwidth;
}

// One level of a collective over n members on one tier. `volume_fraction` is the nccl-tests
// factor (2(n−1)/n for all-reduce), `ring_steps` the steps a ring takes, `tree_rounds` the
// passes over a tree's ⌈log₂ n⌉ levels (2 for an all-reduce: up and down). Without protocols each
// step pays the tier's latency and the cheaper of ring and tree wins; with them each protocol
// prices both (trees for all-reduces only: NCCL has none for all-gather, reduce-scatter or
// broadcast) and the cheapest (protocol, algorithm) wins, as NCCL's tuner picks. NCCL's tree is
// a chain inside a node (`inside_node`: n − 1 hops each way) and a binary tree between nodes.
double level_time_s(const schemas::NetworkTier& tier, schemas::TierCollective collective,
                    std::int64_t n, double bytes, double volume_fraction, double ring_steps,
                    double tree_rounds, bool all_reduce, bool inside_node) {
  if (n <= 1 || bytes <= 0) return 0;
  const double bus = bus_bandwidth_bytes_per_s(tier, collective, bytes);
  const double tree_levels = std::ceil(std::log2(static_cast<double>(n)));
  if (tier.protocols.empty()) {
    const double latency_s = tier.latency_us * 1e-6;
    const double transfer_s = volume_fraction * bytes / bus;
    const double ring_s = ring_steps * latency_s + transfer_s;
    const double tree_s = tree_rounds * tree_levels * latency_s + transfer_s;
    return std::min(ring_s, tree_s);
  }
  double best_s = std::numeric_limits<double>::infinity();
  for (const schemas::TierProtocol& protocol : tier.protocols) {
    const double transfer_s =
        volume_fraction * bytes / protocol_bandwidth_bytes_per_s(protocol, bus);
    const double base_s = protocol.base_latency_us * 1e-6;
    best_s =
        std::min(best_s, base_s + ring_steps * protocol.ring_hop_latency_us * 1e-6 + transfer_s);
    if (all_reduce) {
      const double hops = tree_rounds * (inside_node ? static_cast<double>(n - 1) : tree_levels);
      best_s = std::min(best_s, base_s + hops * protocol.tree_hop_latency_us * 1e-6 + transfer_s);
    }
  }
  return best_s;
}

}  // namespace

GroupSpan group_span(const schemas::ClusterConfig& cluster,
                     const std::vector<std::int64_t>& ranks) {
  GroupSpan span;
  span.size = static_cast<std::int64_t>(ranks.size());
  std::int64_t domains_below = span.size;
  std::vector<std::int64_t> domains(ranks.size());
  for (std::size_t tier = 0; tier < cluster.network_tiers.size() && domains_below > 1; ++tier) {
    const std::int64_t scope = cluster.network_tiers[tier].scope_gpus;
    const bool outermost = tier + 1 == cluster.network_tiers.size();
    std::int64_t domains_here = 1;
    if (!outermost) {
      for (std::size_t i = 0; i < ranks.size(); ++i) domains[i] = ranks[i] / scope;
      std::sort(domains.begin(), domains.end());
      domains_here = std::unique(domains.begin(), domains.end()) - domains.begin();
    }
    const std::int64_t fan_out = domains_below / domains_here;
    if (fan_out > 1) span.levels.push_back({static_cast<int>(tier), fan_out});
    domains_below = domains_here;
  }
  return span;
}

std::vector<std::int64_t> first_group_ranks(const schemas::Mesh& mesh,
                                            const std::vector<schemas::MeshAxis>& axes) {
  return schemas::mesh_group_of(mesh, axes, 0);
}

namespace {

// NCCL runs all-gather and reduce-scatter as rings only (it has no tree for them). A ring over a
// group spanning tiers enters and leaves each domain once per channel; NCCL gives each of the
// k members of a domain its own channel, so the domain's boundary carries the (n−1)/n·S of every
// ring link over k NICs. Rings are pipelined: the slowest tier sets the pace, and every one of
// the n−1 steps pays the slowest tier's latency (its protocol's hop latency where it lists
// protocols, after the protocol's base latency once).
double multi_tier_ring_time_s(const schemas::ClusterConfig& cluster, const GroupSpan& span,
                              schemas::TierCollective collective, double bytes) {
  const double n = static_cast<double>(span.size);
  const schemas::NetworkTier& outermost =
      cluster.network_tiers[static_cast<std::size_t>(span.levels.back().tier)];
  // One ring runs one protocol end to end: the outermost tier's protocols (the one whose latency
  // dominates) are tried, each tier priced by its protocol of that name (or plainly, if it lists
  // none of that name). Without protocols there, one plain ring.
  std::vector<const schemas::TierProtocol*> choices;
  for (const schemas::TierProtocol& protocol : outermost.protocols) choices.push_back(&protocol);
  if (choices.empty()) choices.push_back(nullptr);
  double best_s = std::numeric_limits<double>::infinity();
  for (const schemas::TierProtocol* choice : choices) {
    double slowest_s = 0;
    double hop_s = 0;
    double members_inside = 1;  // members per domain of the tier being crossed
    for (const TierSpan& level : span.levels) {
      const schemas::NetworkTier& tier =
          cluster.network_tiers[static_cast<std::size_t>(level.tier)];
      const schemas::TierProtocol* protocol = nullptr;
      for (const schemas::TierProtocol& candidate : tier.protocols) {
        if (choice != nullptr && candidate.name == choice->name) protocol = &candidate;
      }
      const double per_link_bytes = (n - 1) / n * bytes / members_inside;
      const double bus = bus_bandwidth_bytes_per_s(tier, collective, bytes / members_inside);
      const double bandwidth =
          protocol != nullptr ? protocol_bandwidth_bytes_per_s(*protocol, bus) : bus;
      slowest_s = std::max(slowest_s, per_link_bytes / bandwidth);
      hop_s = std::max(
          hop_s, (protocol != nullptr ? protocol->ring_hop_latency_us : tier.latency_us) * 1e-6);
      members_inside *= static_cast<double>(level.fan_out);
    }
    const double base_s = choice != nullptr ? choice->base_latency_us * 1e-6 : 0.0;
    best_s = std::min(best_s, base_s + (n - 1) * hop_s + slowest_s);
  }
  return best_s;
}

// All-to-all sends each member S/n to every other member at once (NCCL's grouped sends and
// receives). Of S, a member's peers outside its tier-i domain but inside its tier-(i+1) domain
// receive (members_inside_next − members_inside)/n over tier i's links, each GPU with its own;
// the tiers carry their shares at the same time, so the slowest sets the pace, after one latency
// of the outermost tier crossed.
double all_to_all_time_s(const schemas::ClusterConfig& cluster, const GroupSpan& span,
                         double bytes) {
  const double n = static_cast<double>(span.size);
  double slowest_s = 0;
  double latency_s = 0;
  double members_inside = 1;
  for (const TierSpan& level : span.levels) {
    const schemas::NetworkTier& tier = cluster.network_tiers[static_cast<std::size_t>(level.tier)];
    const double members_next = members_inside * static_cast<double>(level.fan_out);
    const double crossing_bytes = bytes * (members_next - members_inside) / n;
    slowest_s =
        std::max(slowest_s, crossing_bytes / bus_bandwidth_bytes_per_s(
                                                 tier, schemas::TierCollective::all_gather, bytes));
    latency_s = std::max(latency_s, tier.latency_us * 1e-6);
    members_inside = members_next;
  }
  return latency_s + slowest_s;
}

}  // namespace

double collective_time_s(const schemas::ClusterConfig& cluster, const GroupSpan& span,
                         Collective collective, double bytes) {
  if (span.size <= 1 || bytes <= 0) return 0;
  if (collective == Collective::all_to_all) return all_to_all_time_s(cluster, span, bytes);
  if (span.levels.size() > 1 &&
      (collective == Collective::all_gather || collective == Collective::reduce_scatter)) {
    return multi_tier_ring_time_s(cluster, span, measured_kind(collective), bytes);
  }
  double total_s = 0;
  double level_bytes = bytes;  // what each level works on: shrinks by the fan-out going out
  for (std::size_t i = 0; i < span.levels.size(); ++i) {
    const schemas::NetworkTier& tier = cluster.network_tiers[span.levels[i].tier];
    const std::int64_t n = span.levels[i].fan_out;
    const double fraction = static_cast<double>(n - 1) / static_cast<double>(n);
    const bool outermost = i + 1 == span.levels.size();
    const bool inside_node = tier.scope_gpus <= cluster.gpus_per_node;
    const schemas::TierCollective kind = measured_kind(collective);
    switch (collective) {
      case Collective::all_reduce:
      case Collective::all_reduce_non_blocking:
        // Inner levels: reduce-scatter on the way out and all-gather on the way back; the
        // outermost level all-reduces its shard.
        total_s +=
            outermost
                ? level_time_s(tier, kind, n, level_bytes, 2 * fraction,
                               2.0 * static_cast<double>(n - 1), 2, true, inside_node)
                : level_time_s(tier, schemas::TierCollective::reduce_scatter, n, level_bytes,
                               fraction, static_cast<double>(n - 1), 1, false, inside_node) +
                      level_time_s(tier, schemas::TierCollective::all_gather, n, level_bytes,
                                   fraction, static_cast<double>(n - 1), 1, false, inside_node);
        break;
      case Collective::all_gather:
      case Collective::reduce_scatter:
      case Collective::all_to_all:  // returned above
        total_s += level_time_s(tier, kind, n, level_bytes, fraction, static_cast<double>(n - 1), 1,
                                false, inside_node);
        break;
      case Collective::broadcast:
        total_s += level_time_s(tier, kind, n, level_bytes, 1.0, static_cast<double>(n - 1), 1,
                                false, inside_node);
        break;
    }
    // Broadcast forwards the whole buffer at every level; the others hand each outer level one
    // shard per member.
    if (collective != Collective::broadcast) level_bytes /= static_cast<double>(n);
  }
  return total_s;
}

double point_to_point_time_s(const schemas::ClusterConfig& cluster, int tier, double bytes) {
  if (bytes <= 0) return 0;
  const schemas::NetworkTier& link = cluster.network_tiers.at(static_cast<std::size_t>(tier));
  return link.latency_us * 1e-6 +
         bytes / bus_bandwidth_bytes_per_s(link, schemas::TierCollective::send_receive, bytes);
}

int tier_between(const schemas::ClusterConfig& cluster, std::int64_t rank_a, std::int64_t rank_b) {
  for (std::size_t tier = 0; tier + 1 < cluster.network_tiers.size(); ++tier) {
    const std::int64_t scope = cluster.network_tiers[tier].scope_gpus;
    if (rank_a / scope == rank_b / scope) return static_cast<int>(tier);
  }
  return static_cast<int>(cluster.network_tiers.size()) - 1;
}

}  // namespace strata::costmodels
