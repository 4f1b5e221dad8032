// Seeds of random streams that belong to parallel groups rather than to tensor coordinates
// (ATorch's multi-dimensional randomizer): a stream may be shared by the ranks of some groups —
// "same along tensor", say, so every rank of a tp group draws the same numbers — and differ along
// the others. Used where randomness is per rank by design (data shuffles or noise a rank draws for
// itself); initialisation and dropout need none of this, being keyed by global element indices.
//
// For parallel dimensions g_0 … g_{k−1} (e.g. tensor, data, pipeline) with sizes n_i and this
// rank's coordinates c_i, the stream that is the same across the dimensions in S has
//   seed = base + code(S)·W + Σ_{i ∉ S} c_i·stride_i,
//   code(S) = Σ_{i ∈ S} 2^i,  W = Π n_i,  stride_i = Π_{j < i} n_j.
// Ranks that differ only along S get one seed; any other pair of ranks, or another S, gets
// another — seeds of different S never collide, as code(S)·W separates them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/schemas/mesh_ranks.h"

namespace strata::executor {

struct ParallelDimension {
  std::int64_t size = 1;
  std::int64_t coordinate = 0;  // this rank's, in [0, size)
};

// `same` is a bit mask over `dimensions` (bit i: the stream is shared along dimension i).
std::uint64_t parallel_group_seed(std::span<const ParallelDimension> dimensions, std::uint32_t same,
                                  std::uint64_t base);

// The dimensions of `rank` in `mesh` for the given axes, in that order (e.g. {tp, dp, pp}).
std::vector<ParallelDimension> parallel_dimensions(const schemas::Mesh& mesh, std::int64_t rank,
                                                   std::span<const schemas::MeshAxis> axes);

}  // namespace strata::executor
