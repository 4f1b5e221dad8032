// Where every group of a mesh sits on a cluster's network tiers: the one computation of it, once
// per mesh and cluster. The layer costs (tp, cp, ep, etp and ZeRO-3's per-layer groups), the plan
// costs (gradient reduction, ZeRO's shard and replica groups, the experts' groups, pipeline sends,
// the tied embedding's pair) and the planner read it; the planner's distinct mesh orders and its
// layer-cost cache are keyed by it, so two orders are one candidate exactly when every group of
// theirs sits on the same tiers.
#pragma once

#include <compare>

#include "strata/costmodels/collective_time.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"

namespace strata::costmodels {

struct MeshPlacement {
  GroupSpan tp;                 // tensor (and sequence) parallelism
  GroupSpan cp;                 // context parallelism: what the all-gather variant gathers over
  int cp_tier = 0;              // the tier ring attention's neighbours talk over (0 without cp)
  GroupSpan reduction;          // dp × cp: what sums each dense gradient
  GroupSpan zero_shard;         // ZeRO's shard group (dp_shard·cp under hybrid sharding)
  GroupSpan zero_replica;       // hybrid sharding's replicas of a shard (a group of one without)
  GroupSpan ep, etp;            // the expert mesh (groups of one without experts)
  GroupSpan edp;                // the expert data-parallel group: what sums each expert gradient
  GroupSpan expert_zero_shard;  // over which the routed experts' ZeRO state is sharded
  int pp_tier = 0;              // between neighbouring pipeline ranks (0 without pp)
  GroupSpan embedding_pair;     // the first and last pipeline rank (a tied embedding's sum)
  auto operator<=>(const MeshPlacement&) const = default;
};

// A group the model does not use is left a group of one — the experts' without a mixture of
// experts, the embedding pair without a tied embedding — so that orders differing only there are
// one candidate.
MeshPlacement mesh_placement(const schemas::ClusterConfig& cluster, const schemas::Mesh& mesh,
                             const schemas::ModelConfig& model);

}  // namespace strata::costmodels
