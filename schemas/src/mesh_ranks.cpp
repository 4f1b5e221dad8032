#include "strata/schemas/mesh_ranks.h"

#include <algorithm>
#include <array>

namespace strata::schemas {
namespace {

bool in_mask(std::span<const MeshAxis> axes, MeshAxis axis) {
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

}  // namespace

std::int64_t axis_stride(const Mesh& mesh, MeshAxis axis) {
  std::int64_t stride = 1;
  for (MeshAxis inner : mesh.order) {
    if (inner == axis) break;
    stride *= mesh.size_of(inner);
  }
  return stride;
}

MeshCoordinates mesh_coordinates(const Mesh& mesh, std::int64_t rank) {
  MeshCoordinates coordinates{};
  for (MeshAxis axis : mesh.order) {
    const std::int64_t size = mesh.size_of(axis);
    coordinates[static_cast<std::size_t>(axis)] = rank % size;
    rank /= size;
  }
  return coordinates;
}

std::int64_t mesh_rank(const Mesh& mesh, const MeshCoordinates& coordinates) {
  std::int64_t rank = 0;
  for (MeshAxis axis : mesh.order) {
    rank += coordinates[static_cast<std::size_t>(axis)] * axis_stride(mesh, axis);
  }
  return rank;
}

std::vector<std::int64_t> mesh_group_of(const Mesh& mesh, std::span<const MeshAxis> axes,
                                        std::int64_t rank) {
  // The group's first member zeroes the masked coordinates; the others add every combination of
  // masked coordinates times their strides, the fastest axis innermost (so ranks increase).
  MeshCoordinates base = mesh_coordinates(mesh, rank);
  for (MeshAxis axis : axes) base[static_cast<std::size_t>(axis)] = 0;
  std::vector<std::int64_t> group{mesh_rank(mesh, base)};
  for (MeshAxis axis : mesh.order) {
    if (!in_mask(axes, axis)) continue;
    const std::int64_t stride = axis_stride(mesh, axis);
    const std::size_t inner = group.size();
    for (std::int64_t index = 1; index < mesh.size_of(axis); ++index) {
      for (std::size_t member = 0; member < inner; ++member) {
        group.push_back(group[member] + index * stride);
      }
    }
  }
  return group;
}

std::vector<std::int64_t> mesh_group_of(const Mesh& mesh, std::initializer_list<MeshAxis> axes,
                                        std::int64_t rank) {
  return mesh_group_of(mesh, std::span<const MeshAxis>(axes.begin(), axes.size()), rank);
}

std::int64_t mesh_group_rank(const Mesh& mesh, std::initializer_list<MeshAxis> axes,
                             std::int64_t rank) {
  const std::vector<std::int64_t> group = mesh_group_of(mesh, axes, rank);
  return std::find(group.begin(), group.end(), rank) - group.begin();
}

namespace {

std::int64_t dp_index(const Mesh& mesh, std::int64_t rank) {
  return mesh_coordinates(mesh, rank)[static_cast<std::size_t>(MeshAxis::dp)];
}

std::int64_t position_in(const std::vector<std::int64_t>& group, std::int64_t rank) {
  return std::find(group.begin(), group.end(), rank) - group.begin();
}

}  // namespace

std::vector<std::int64_t> zero_shard_group_of(const Mesh& mesh, std::int64_t rank) {
  const std::int64_t block = dp_index(mesh, rank) / mesh.zero_shard_dp();
  std::vector<std::int64_t> group;
  for (std::int64_t member : mesh_group_of(mesh, {MeshAxis::dp, MeshAxis::cp}, rank)) {
    if (dp_index(mesh, member) / mesh.zero_shard_dp() == block) group.push_back(member);
  }
  return group;
}

std::vector<std::int64_t> zero_replica_group_of(const Mesh& mesh, std::int64_t rank) {
  const std::int64_t within = dp_index(mesh, rank) % mesh.zero_shard_dp();
  std::vector<std::int64_t> group;
  for (std::int64_t member : mesh_group_of(mesh, {MeshAxis::dp}, rank)) {
    if (dp_index(mesh, member) % mesh.zero_shard_dp() == within) group.push_back(member);
  }
  return group;
}

std::int64_t zero_shard_rank(const Mesh& mesh, std::int64_t rank) {
  return position_in(zero_shard_group_of(mesh, rank), rank);
}

std::int64_t zero_replica_rank(const Mesh& mesh, std::int64_t rank) {
  return position_in(zero_replica_group_of(mesh, rank), rank);
}

std::vector<std::vector<std::int64_t>> mesh_groups(const Mesh& mesh,
                                                   std::span<const MeshAxis> axes) {
  std::vector<std::vector<std::int64_t>> groups;
  for (std::int64_t rank = 0; rank < mesh.world_size(); ++rank) {
    const MeshCoordinates coordinates = mesh_coordinates(mesh, rank);
    const bool first_member = std::all_of(axes.begin(), axes.end(), [&](MeshAxis axis) {
      return coordinates[static_cast<std::size_t>(axis)] == 0;
    });
    if (first_member) groups.push_back(mesh_group_of(mesh, axes, rank));
  }
  return groups;
}

std::vector<std::vector<std::int64_t>> mesh_groups(const Mesh& mesh,
                                                   std::initializer_list<MeshAxis> axes) {
  return mesh_groups(mesh, std::span<const MeshAxis>(axes.begin(), axes.size()));
}

std::vector<std::vector<std::int64_t>> mesh_groups(const Mesh& mesh, MeshAxis axis) {
  return mesh_groups(mesh, {axis});
}

std::int64_t expert_size_of(const Mesh& mesh, ExpertAxis axis) {
  switch (axis) {
    case ExpertAxis::etp:
      return mesh.etp;
    case ExpertAxis::ep:
      return mesh.ep;
    case ExpertAxis::edp:
      return mesh.expert_dp();
    case ExpertAxis::pp:
      return mesh.pp;
  }
  return 1;
}

ExpertCoordinates expert_coordinates(const Mesh& mesh, std::int64_t rank) {
  // The rank's place in its stage's {tp, cp, dp} group: its coordinates on those axes in the mesh
  // order, the fastest first (as mesh_group_of orders the group).
  const MeshCoordinates mesh_place = mesh_coordinates(mesh, rank);
  std::int64_t stage_index = 0;
  std::int64_t stride = 1;
  for (MeshAxis axis : mesh.order) {
    if (axis == MeshAxis::pp) continue;
    stage_index += mesh_place[static_cast<std::size_t>(axis)] * stride;
    stride *= mesh.size_of(axis);
  }
  ExpertCoordinates coordinates{};
  for (ExpertAxis axis : {ExpertAxis::etp, ExpertAxis::ep, ExpertAxis::edp}) {
    coordinates[static_cast<std::size_t>(axis)] = stage_index % expert_size_of(mesh, axis);
    stage_index /= expert_size_of(mesh, axis);
  }
  coordinates[static_cast<std::size_t>(ExpertAxis::pp)] =
      mesh_place[static_cast<std::size_t>(MeshAxis::pp)];
  return coordinates;
}

namespace {

// The ranks of the expert-mesh group through `own` along `axes`, with the edp coordinate kept
// within [edp_first, edp_first + edp_count) when edp is among them: every combination of the
// masked coordinates, built from the group's size rather than by scanning the stage (the planner
// asks for the groups of millions of candidates), in increasing rank order.
std::vector<std::int64_t> expert_members(const Mesh& mesh, const ExpertCoordinates& own,
                                         std::initializer_list<ExpertAxis> axes,
                                         std::int64_t edp_first, std::int64_t edp_count) {
  std::vector<ExpertCoordinates> members{own};
  for (ExpertAxis axis : axes) {
    const std::size_t index = static_cast<std::size_t>(axis);
    const std::int64_t first = axis == ExpertAxis::edp ? edp_first : 0;
    const std::int64_t count = axis == ExpertAxis::edp ? edp_count : expert_size_of(mesh, axis);
    const std::size_t inner = members.size();
    for (std::size_t member = 0; member < inner; ++member) members[member][index] = first;
    for (std::int64_t value = first + 1; value < first + count; ++value) {
      for (std::size_t member = 0; member < inner; ++member) {
        members.push_back(members[member]);
        members.back()[index] = value;
      }
    }
  }
  // The inverse of expert_coordinates: the stage index read back as the non-pp mesh axes.
  struct AxisPlace {
    std::int64_t size, stride;
  };
  std::array<AxisPlace, 3> stage_axes{};
  std::size_t stage_axis_count = 0;
  std::int64_t pp_stride = 1;
  std::int64_t stride = 1;
  for (MeshAxis axis : mesh.order) {
    if (axis == MeshAxis::pp) {
      pp_stride = stride;
    } else {
      stage_axes[stage_axis_count++] = {mesh.size_of(axis), stride};
    }
    stride *= mesh.size_of(axis);
  }
  const std::int64_t etp = mesh.etp;
  const std::int64_t etp_ep = mesh.etp * mesh.ep;
  std::vector<std::int64_t> group;
  group.reserve(members.size());
  for (const ExpertCoordinates& member : members) {
    std::int64_t stage_index = member[static_cast<std::size_t>(ExpertAxis::etp)] +
                               etp * member[static_cast<std::size_t>(ExpertAxis::ep)] +
                               etp_ep * member[static_cast<std::size_t>(ExpertAxis::edp)];
    std::int64_t rank = member[static_cast<std::size_t>(ExpertAxis::pp)] * pp_stride;
    for (std::size_t a = 0; a < stage_axis_count; ++a) {
      rank += stage_index % stage_axes[a].size * stage_axes[a].stride;
      stage_index /= stage_axes[a].size;
    }
    group.push_back(rank);
  }
  std::sort(group.begin(), group.end());
  return group;
}

}  // namespace

std::vector<std::int64_t> expert_group_of(const Mesh& mesh, std::initializer_list<ExpertAxis> axes,
                                          std::int64_t rank) {
  return expert_members(mesh, expert_coordinates(mesh, rank), axes, 0, mesh.expert_dp());
}

std::vector<std::vector<std::int64_t>> expert_groups(const Mesh& mesh,
                                                     std::initializer_list<ExpertAxis> axes) {
  std::vector<std::vector<std::int64_t>> groups;
  for (std::int64_t rank = 0; rank < mesh.world_size(); ++rank) {
    const ExpertCoordinates coordinates = expert_coordinates(mesh, rank);
    const bool first_member = std::all_of(axes.begin(), axes.end(), [&](ExpertAxis axis) {
      return coordinates[static_cast<std::size_t>(axis)] == 0;
    });
    if (first_member) groups.push_back(expert_group_of(mesh, axes, rank));
  }
  return groups;
}

std::vector<std::int64_t> expert_zero_shard_group_of(const Mesh& mesh, std::int64_t rank) {
  const std::int64_t shards = mesh.expert_zero_shards();
  const ExpertCoordinates own = expert_coordinates(mesh, rank);
  const std::int64_t block = own[static_cast<std::size_t>(ExpertAxis::edp)] / shards;
  return expert_members(mesh, own, {ExpertAxis::edp}, block * shards, shards);
}

std::vector<std::int64_t> expert_zero_replica_group_of(const Mesh& mesh, std::int64_t rank) {
  const std::int64_t shards = mesh.expert_zero_shards();
  const std::int64_t within =
      expert_coordinates(mesh, rank)[static_cast<std::size_t>(ExpertAxis::edp)] % shards;
  std::vector<std::int64_t> group;
  for (std::int64_t member : expert_group_of(mesh, {ExpertAxis::edp}, rank)) {
    const ExpertCoordinates at = expert_coordinates(mesh, member);
    if (at[static_cast<std::size_t>(ExpertAxis::edp)] % shards == within) group.push_back(member);
  }
  return group;
}

std::int64_t expert_zero_shard_rank(const Mesh& mesh, std::int64_t rank) {
  return position_in(expert_zero_shard_group_of(mesh, rank), rank);
}

std::int64_t expert_zero_replica_rank(const Mesh& mesh, std::int64_t rank) {
  return position_in(expert_zero_replica_group_of(mesh, rank), rank);
}

std::vector<std::int64_t> embedding_group_of(const Mesh& mesh, std::int64_t rank) {
  const std::vector<std::int64_t> pipeline = mesh_group_of(mesh, {MeshAxis::pp}, rank);
  if (pipeline.size() == 1) return pipeline;
  return {pipeline.front(), pipeline.back()};
}

std::vector<std::int64_t> position_embedding_group_of(const Mesh& mesh, std::int64_t rank) {
  return {mesh_group_of(mesh, {MeshAxis::pp}, rank).front()};
}

}  // namespace strata::schemas
