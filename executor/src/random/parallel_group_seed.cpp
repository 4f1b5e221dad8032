#include "strata/executor/random/parallel_group_seed.h"

#include "strata/executor/check.h"

namespace strata::executor {

std::uint64_t parallel_group_seed(std::span<const ParallelDimension> dimensions, std::uint32_t same,
                                  std::uint64_t base) {
  STRATA_CHECK(dimensions.size() < 32, "{} parallel dimensions", dimensions.size());
  STRATA_CHECK((same >> dimensions.size()) == 0, "same-mask {:#x} names a dimension past {}", same,
               dimensions.size());
  std::uint64_t world = 1;
  for (const ParallelDimension& dimension : dimensions) {
    world *= static_cast<std::uint64_t>(dimension.size);
  }
  std::uint64_t seed = base + static_cast<std::uint64_t>(same) * world;
  std::uint64_t stride = 1;
  for (std::size_t i = 0; i < dimensions.size(); ++i) {
    const ParallelDimension& dimension = dimensions[i];
    STRATA_CHECK(dimension.coordinate >= 0 && dimension.coordinate < dimension.size,
                 "coordinate {} outside a dimension of {}", dimension.coordinate, dimension.size);
    if ((same & (1u << i)) == 0) seed += static_cast<std::uint64_t>(dimension.coordinate) * stride;
    stride *= static_cast<std::uint64_t>(dimension.size);
  }
  return seed;
}

std::vector<ParallelDimension> parallel_dimensions(const schemas::Mesh& mesh, std::int64_t rank,
                                                   std::span<const schemas::MeshAxis> axes) {
  const schemas::MeshCoordinates coordinates = schemas::mesh_coordinates(mesh, rank);
  std::vector<ParallelDimension> dimensions;
  for (schemas::MeshAxis axis : axes) {
    dimensions.push_back({mesh.size_of(axis), coordinates[static_cast<std::size_t>(axis)]});
  }
  return dimensions;
}

}  // namespace strata::executor
