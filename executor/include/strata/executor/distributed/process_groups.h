// ProcessGroups: this rank's place in a plan's mesh and one communicator per group it belongs to
// (Megatron-LM's parallel_state), from schemas/mesh_ranks.h's masks over the axes. Used by the
// parallel model (tp), the gradient reduction and optimizer (dp, and the whole job for the
// gradient norm), and the runtime's pipeline (pp, embedding groups).
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "strata/executor/distributed/communicator.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::executor {

class ProcessGroups {
 public:
  // Collective over `world`, whose size must be mesh.world_size() (the caller checks it first, to
  // say so in the user's words). Every rank creates every group kind, in the same order.
  ProcessGroups(Communicator& world, const schemas::Mesh& mesh);

  const schemas::Mesh& mesh() const { return mesh_; }
  const schemas::MeshCoordinates& coordinates() const { return coordinates_; }
  std::int64_t coordinate(schemas::MeshAxis axis) const {
    return coordinates_[static_cast<std::size_t>(axis)];
  }

  Communicator& world() { return world_; }
  Communicator& tensor_parallel() { return *tp_; }
  Communicator& context_parallel() { return *cp_; }
  Communicator& data_parallel() { return *dp_; }
  Communicator& pipeline_parallel() { return *pp_; }
  Communicator& model_parallel() { return *tp_pp_; }      // tp × pp
  Communicator& gradient_reduction() { return *dp_cp_; }  // dp × cp: who sums gradients
  // ZeRO's groups (schemas::zero_shard_group_of): the ranks one copy of the sharded state is
  // spread over, and the ranks holding the same shard (one without hybrid sharding).
  Communicator& zero_shard() { return *zero_shard_; }
  Communicator& zero_replica() { return *zero_replica_; }
  // The expert mesh's groups (schemas::expert_group_of): the ranks a MoE layer's routed experts
  // are split over (ep), and the ranks that hold the same experts and sum their gradients (edp;
  // dp × cp when ep = etp = 1).
  Communicator& expert_parallel() { return *ep_; }
  Communicator& expert_data_parallel() { return *edp_; }
  // The ranks splitting each expert's width (etp), and every rank holding a part of one copy of
  // a stage's experts (etp × ep: whose parts, summed, are all of them).
  Communicator& expert_tensor_parallel() { return *etp_; }
  Communicator& expert_model_parallel() { return *etp_ep_; }
  // ZeRO's groups for the routed experts' state (schemas::expert_zero_shard_group_of): blocks of
  // the expert data-parallel group, split into the same replicas as the dense state.
  Communicator& expert_zero_shard() { return *expert_zero_shard_; }
  Communicator& expert_zero_replica() { return *expert_zero_replica_; }
  Communicator& embedding() { return *embedding_; }          // first and last stage (tied)
  Communicator& position_embedding() { return *position_; }  // first stage
  // The ranks of this rank's tp group that hold the same block of a tensor split into blocks
  // over fewer ranks than tp (each block on `replicas` neighbours: kv heads when tp exceeds
  // them): consecutive runs of `replicas` tp ranks. Created on first request, which every rank
  // of the tp group makes together.
  Communicator& tensor_parallel_replicas(std::int64_t replicas);

 private:
  std::unique_ptr<Communicator> group(std::initializer_list<schemas::MeshAxis> axes);
  std::unique_ptr<Communicator> split_by(const std::vector<std::int64_t>& members);

  Communicator& world_;
  schemas::Mesh mesh_;
  schemas::MeshCoordinates coordinates_;
  std::unique_ptr<Communicator> tp_, cp_, dp_, pp_, tp_pp_, dp_cp_, zero_shard_, zero_replica_, ep_,
      etp_, etp_ep_, edp_, expert_zero_shard_, expert_zero_replica_, embedding_, position_;
  std::map<std::int64_t, std::unique_ptr<Communicator>> tp_replicas_;
};

}  // namespace strata::executor
