#include "strata/executor/distributed/process_groups.h"

#include <algorithm>

namespace strata::executor {

using schemas::MeshAxis;

ProcessGroups::ProcessGroups(Communicator& world, const schemas::Mesh& mesh)
    : world_(world), mesh_(mesh) {
  STRATA_CHECK(world.size() == mesh.world_size(), "a mesh of {} ranks on a job of {}",
               mesh.world_size(), world.size());
  coordinates_ = schemas::mesh_coordinates(mesh_, world.rank());
  tp_ = group({MeshAxis::tp});
  cp_ = group({MeshAxis::cp});
  dp_ = group({MeshAxis::dp});
  pp_ = group({MeshAxis::pp});
  tp_pp_ = group({MeshAxis::tp, MeshAxis::pp});
  dp_cp_ = group({MeshAxis::dp, MeshAxis::cp});
  zero_shard_ = split_by(schemas::zero_shard_group_of(mesh_, world.rank()));
  zero_replica_ = split_by(schemas::zero_replica_group_of(mesh_, world.rank()));
  ep_ = split_by(schemas::expert_group_of(mesh_, {schemas::ExpertAxis::ep}, world.rank()));
  etp_ = split_by(schemas::expert_group_of(mesh_, {schemas::ExpertAxis::etp}, world.rank()));
  etp_ep_ = split_by(schemas::expert_group_of(
      mesh_, {schemas::ExpertAxis::etp, schemas::ExpertAxis::ep}, world.rank()));
  edp_ = split_by(schemas::expert_group_of(mesh_, {schemas::ExpertAxis::edp}, world.rank()));
  expert_zero_shard_ = split_by(schemas::expert_zero_shard_group_of(mesh_, world.rank()));
  expert_zero_replica_ = split_by(schemas::expert_zero_replica_group_of(mesh_, world.rank()));
  embedding_ = split_by(schemas::embedding_group_of(mesh_, world.rank()));
  position_ = split_by(schemas::position_embedding_group_of(mesh_, world.rank()));
}

std::unique_ptr<Communicator> ProcessGroups::group(std::initializer_list<MeshAxis> axes) {
  return split_by(schemas::mesh_group_of(mesh_, axes, world_.rank()));
}

// Members of one group share a color — their first member's rank, unique to the group — and are
// ranked by their position in it.
std::unique_ptr<Communicator> ProcessGroups::split_by(const std::vector<std::int64_t>& members) {
  const auto self = std::find(members.begin(), members.end(), world_.rank());
  const bool member = self != members.end();
  // A rank outside the group (the embedding group of a middle stage) gets a group of itself.
  const int color = member ? static_cast<int>(members.front()) : world_.rank() + world_.size();
  const int key = member ? static_cast<int>(self - members.begin()) : 0;
  return world_.split(color, key);
}

Communicator& ProcessGroups::tensor_parallel_replicas(std::int64_t replicas) {
  STRATA_CHECK(replicas >= 1 && mesh_.tp % replicas == 0, "{} replicas in a tp group of {}",
               replicas, mesh_.tp);
  auto found = tp_replicas_.find(replicas);
  if (found == tp_replicas_.end()) {
    const int tp_rank = tp_->rank();
    found =
        tp_replicas_.emplace(replicas, tp_->split(tp_rank / static_cast<int>(replicas), tp_rank))
            .first;
  }
  return *found->second;
}

}  // namespace strata::executor
