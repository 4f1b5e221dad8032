#include "strata/schemas/mesh_ranks.h"

#include <algorithm>

namespace strata::schemas {

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

std::vector<std::vector<std::int64_t>> mesh_groups(const Mesh& mesh, MeshAxis axis) {
  const std::int64_t size = mesh.size_of(axis);
  const std::int64_t stride = axis_stride(mesh, axis);
  std::vector<std::vector<std::int64_t>> groups;
  for (std::int64_t rank = 0; rank < mesh.world_size(); ++rank) {
    if (mesh_coordinates(mesh, rank)[static_cast<std::size_t>(axis)] != 0) continue;
    std::vector<std::int64_t> group;
    for (std::int64_t index = 0; index < size; ++index) group.push_back(rank + index * stride);
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace strata::schemas
