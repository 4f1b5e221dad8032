#include "strata/planner/mesh_orders.h"

#include <algorithm>

#include "strata/costmodels/mesh_placement.h"

namespace strata::planner {

using schemas::MeshAxis;

std::vector<MeshOrder> all_orders() {
  MeshOrder order{MeshAxis::tp, MeshAxis::cp, MeshAxis::dp, MeshAxis::pp};
  std::vector<MeshOrder> orders{order};
  std::array<int, 4> index{0, 1, 2, 3};
  while (std::next_permutation(index.begin(), index.end())) {
    orders.push_back({order[index[0]], order[index[1]], order[index[2]], order[index[3]]});
  }
  return orders;
}

std::int64_t node_shard_block(const schemas::ClusterConfig& cluster, std::int64_t tp,
                              std::int64_t cp, std::int64_t dp) {
  const std::int64_t node_shard = cluster.gpus_per_node / (tp * cp);
  const bool fits = node_shard >= 1 && node_shard < dp && dp % node_shard == 0 &&
                    cluster.gpus_per_node % (tp * cp) == 0;
  return fits ? node_shard : 0;
}

std::vector<std::int16_t> distinct_orders(
    const schemas::ClusterConfig& cluster, const schemas::ModelConfig& model,
    const std::vector<MeshOrder>& orders, std::int64_t tp, std::int64_t cp, std::int64_t dp,
    std::int64_t pp, const std::vector<std::int64_t>& dp_shards,
    const std::vector<std::pair<std::int32_t, std::int32_t>>& expert_meshes) {
  std::vector<std::int16_t> kept;
  std::vector<std::vector<costmodels::MeshPlacement>> seen;
  for (std::size_t i = 0; i < orders.size(); ++i) {
    std::vector<costmodels::MeshPlacement> signature;
    for (const std::int64_t dp_shard : dp_shards) {
      for (const auto& [ep, etp] : expert_meshes) {
        const schemas::Mesh mesh{tp, cp, dp, pp, 1, orders[i], dp_shard, ep, etp};
        signature.push_back(costmodels::mesh_placement(cluster, mesh, model));
      }
    }
    if (std::find(seen.begin(), seen.end(), signature) == seen.end()) {
      seen.push_back(std::move(signature));
      kept.push_back(static_cast<std::int16_t>(i));
    }
  }
  return kept;
}

}  // namespace strata::planner
