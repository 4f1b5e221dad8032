// The mesh orders the planner searches: the order of the tp, cp, dp and pp axes decides which
// ranks form each group, and so where each group sits on the cluster's network. Orders that put
// every group of every candidate they stand for on the same tiers are one candidate.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"

namespace strata::planner {

using MeshOrder = std::array<schemas::MeshAxis, 4>;

// The 24 orders of the mesh axes, the default (tp-cp-dp-pp, Megatron's) first.
std::vector<MeshOrder> all_orders();

// Hybrid sharding's shard block where the planner searches it (FSDP2's HSDP, Megatron's
// distributed-optimizer instances): ZeRO within one node where dp spans several; 0 where none.
std::int64_t node_shard_block(const schemas::ClusterConfig& cluster, std::int64_t tp,
                              std::int64_t cp, std::int64_t dp);

// The indices into `orders` of its distinct network placements for a tp·cp·dp·pp mesh of `model`
// on `cluster`, the first of each kind kept (the default order first). Two orders are one kind
// when every candidate they stand for — each ZeRO sharding (`dp_shards`: 0 for all of dp, and
// hybrid shard blocks) and each expert mesh (`expert_meshes`, (ep, etp); {(1, 1)} for a dense
// model) — has its groups on the same tiers (costmodels::mesh_placement): the key is that value,
// not a list of spans kept by hand.
std::vector<std::int16_t> distinct_orders(
    const schemas::ClusterConfig& cluster, const schemas::ModelConfig& model,
    const std::vector<MeshOrder>& orders, std::int64_t tp, std::int64_t cp, std::int64_t dp,
    std::int64_t pp, const std::vector<std::int64_t>& dp_shards,
    const std::vector<std::pair<std::int32_t, std::int32_t>>& expert_meshes);

}  // namespace strata::planner
