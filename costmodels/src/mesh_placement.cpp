#include "strata/costmodels/mesh_placement.h"

#include "strata/schemas/mesh_ranks.h"

namespace strata::costmodels {

using schemas::ExpertAxis;
using schemas::MeshAxis;

MeshPlacement mesh_placement(const schemas::ClusterConfig& cluster, const schemas::Mesh& mesh,
                             const schemas::ModelConfig& model) {
  MeshPlacement placement;
  placement.tp = group_span(cluster, first_group_ranks(mesh, {MeshAxis::tp}));
  placement.cp = group_span(cluster, first_group_ranks(mesh, {MeshAxis::cp}));
  if (mesh.cp > 1) {
    placement.cp_tier = tier_between(cluster, 0, schemas::axis_stride(mesh, MeshAxis::cp));
  }
  placement.reduction = group_span(cluster, first_group_ranks(mesh, {MeshAxis::dp, MeshAxis::cp}));
  placement.zero_shard = group_span(cluster, schemas::zero_shard_group_of(mesh, 0));
  placement.zero_replica = group_span(cluster, schemas::zero_replica_group_of(mesh, 0));
  if (model.moe) {
    placement.ep = group_span(cluster, schemas::expert_group_of(mesh, {ExpertAxis::ep}, 0));
    placement.etp = group_span(cluster, schemas::expert_group_of(mesh, {ExpertAxis::etp}, 0));
    placement.edp = group_span(cluster, schemas::expert_group_of(mesh, {ExpertAxis::edp}, 0));
    // Hybrid shards must split the expert data-parallel group evenly (validate_plan refuses the
    // rest); a mesh that does not has no expert shard group to place.
    if (mesh.expert_dp() % mesh.zero_replicas() == 0) {
      placement.expert_zero_shard =
          group_span(cluster, schemas::expert_zero_shard_group_of(mesh, 0));
    }
  }
  if (mesh.pp > 1) {
    const std::int64_t stride = schemas::axis_stride(mesh, MeshAxis::pp);
    placement.pp_tier = tier_between(cluster, 0, stride);
    if (model.last_stage_uses_word_embedding()) {
      placement.embedding_pair = group_span(cluster, {0, (mesh.pp - 1) * stride});
    }
  }
  return placement;
}

}  // namespace strata::costmodels
