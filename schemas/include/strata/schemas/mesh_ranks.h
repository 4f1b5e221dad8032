// Where each rank sits in a plan's mesh and which ranks form each group, from the mesh sizes and
// their order (Megatron-LM's RankGenerator): sizes in the plan's order, strides their prefix
// products, and any group is a mask over axes — {tp}, {dp}, {pp}, {tp, pp} (model parallel),
// {dp, cp} (gradient reduction), ... — holding the ranks that agree on every axis outside the
// mask. Used by the cost models (which network tiers a group spans) and by the executor (its
// process groups, one communicator per group this rank is in).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "strata/schemas/plan.h"

namespace strata::schemas {

// Coordinates indexed by MeshAxis (tp, cp, dp, pp).
using MeshCoordinates = std::array<std::int64_t, 4>;

// Distance in rank numbers between neighbours along `axis`: the product of the sizes of the axes
// listed before it in the order (the fastest-varying first).
std::int64_t axis_stride(const Mesh& mesh, MeshAxis axis);
MeshCoordinates mesh_coordinates(const Mesh& mesh, std::int64_t rank);
std::int64_t mesh_rank(const Mesh& mesh, const MeshCoordinates& coordinates);

// The group along `axes` that holds `rank`: the ranks whose coordinates equal rank's on every
// axis not in `axes`, in increasing rank order (which is the order of their coordinates along
// `axes`, the fastest axis varying first). An empty mask gives {rank}; all four give every rank.
std::vector<std::int64_t> mesh_group_of(const Mesh& mesh, std::span<const MeshAxis> axes,
                                        std::int64_t rank);
std::vector<std::int64_t> mesh_group_of(const Mesh& mesh, std::initializer_list<MeshAxis> axes,
                                        std::int64_t rank);
// `rank`'s place in its group along `axes` (its rank in the communicator of that group).
std::int64_t mesh_group_rank(const Mesh& mesh, std::initializer_list<MeshAxis> axes,
                             std::int64_t rank);

// Every group along `axes`, each in increasing rank order, groups in order of their first rank.
// E.g. tp=2, dp=2, order tp-cp-dp-pp: tp groups {0,1} {2,3}, dp groups {0,2} {1,3}.
std::vector<std::vector<std::int64_t>> mesh_groups(const Mesh& mesh,
                                                   std::span<const MeshAxis> axes);
std::vector<std::vector<std::int64_t>> mesh_groups(const Mesh& mesh,
                                                   std::initializer_list<MeshAxis> axes);
std::vector<std::vector<std::int64_t>> mesh_groups(const Mesh& mesh, MeshAxis axis);

// ZeRO's groups under hybrid sharding (Mesh::dp_shard). The shard group of `rank`: the ranks of
// its dp × cp group whose dp index is in its block of zero_shard_dp() consecutive ones, in that
// group's order (with full sharding, the whole dp × cp group). Its replica group: the ranks of its
// dp group holding the same shard in every block (with full sharding, itself alone). A rank's
// shard is its place in its shard group.
std::vector<std::int64_t> zero_shard_group_of(const Mesh& mesh, std::int64_t rank);
std::vector<std::int64_t> zero_replica_group_of(const Mesh& mesh, std::int64_t rank);
std::int64_t zero_shard_rank(const Mesh& mesh, std::int64_t rank);
std::int64_t zero_replica_rank(const Mesh& mesh, std::int64_t rank);

// The expert mesh (Megatron-Core's parallel folding): a MoE layer's ranks are the attention's,
// read as etp × ep × edp × pp. Within each pipeline stage (a {tp, cp, dp} group) a rank's place in
// that group — its coordinates in the mesh order, the fastest first — is split as
//
//   stage_index = etp_index + etp·(ep_index + ep·edp_index)
//
// so with Megatron's default order (tp-cp-ep-dp-pp) the ranks agree with its expert
// RankGenerator: an etp group is etp consecutive stage ranks, an ep group strides by etp, and the
// expert data-parallel group (the ranks holding the same expert shard, which sum its gradients)
// strides by etp·ep. With ep·etp = tp·cp each ep×etp group is an attention tp×cp group.
enum class ExpertAxis { etp, ep, edp, pp };
using ExpertCoordinates = std::array<std::int64_t, 4>;  // indexed by ExpertAxis

std::int64_t expert_size_of(const Mesh& mesh, ExpertAxis axis);
ExpertCoordinates expert_coordinates(const Mesh& mesh, std::int64_t rank);
// The group along `axes` of the expert mesh that holds `rank`, in increasing rank order.
std::vector<std::int64_t> expert_group_of(const Mesh& mesh, std::initializer_list<ExpertAxis> axes,
                                          std::int64_t rank);
// Every group along `axes`, groups in order of their first rank.
std::vector<std::vector<std::int64_t>> expert_groups(const Mesh& mesh,
                                                     std::initializer_list<ExpertAxis> axes);
// ZeRO's groups for expert state: the expert data-parallel group split into the same replicas as
// the dense state (dp / dp_shard blocks of consecutive edp indices).
std::vector<std::int64_t> expert_zero_shard_group_of(const Mesh& mesh, std::int64_t rank);
// Its replica group: the members of the expert data-parallel group holding the same expert shard
// in every block (one rank with full sharding). A rank's expert shard is its place in its expert
// shard group, as the dense state's is in its shard group.
std::vector<std::int64_t> expert_zero_replica_group_of(const Mesh& mesh, std::int64_t rank);
std::int64_t expert_zero_shard_rank(const Mesh& mesh, std::int64_t rank);
std::int64_t expert_zero_replica_rank(const Mesh& mesh, std::int64_t rank);

// The ranks that share a tied word embedding with `rank`: the first and the last stage of its
// pipeline (Megatron's embedding group; one rank when pp = 1). Their embedding gradients are
// summed before the optimizer step.
std::vector<std::int64_t> embedding_group_of(const Mesh& mesh, std::int64_t rank);
// The rank of `rank`'s pipeline that holds the learned position embedding: its first stage
// (Megatron's position-embedding group).
std::vector<std::int64_t> position_embedding_group_of(const Mesh& mesh, std::int64_t rank);

}  // namespace strata::schemas
