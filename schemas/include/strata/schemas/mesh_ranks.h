// Where each rank sits in a plan's mesh and which ranks form each tp, cp, dp or pp group, from
// the mesh sizes and their order (Megatron-LM's RankGenerator). Used by the cost models (which
// network tiers a group spans) and by the executor (its process groups).
#pragma once

#include <array>
#include <cstdint>
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

// Every group along `axis` (ranks that differ only in that coordinate), each in order of that
// coordinate; groups in order of their first rank. E.g. tp=2, dp=2, order tp-cp-dp-pp:
// tp groups {0,1} {2,3}, dp groups {0,2} {1,3}.
std::vector<std::vector<std::int64_t>> mesh_groups(const Mesh& mesh, MeshAxis axis);

}  // namespace strata::schemas
