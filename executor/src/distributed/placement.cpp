#include "strata/executor/distributed/placement.h"

namespace strata::executor {
namespace {

// Appends the intervals of one segment (blocks × block_size elements from `segment_start`).
void segment_intervals(const ShardSegment& segment, std::int64_t segment_start, std::int64_t rank,
                       std::int64_t size, std::vector<DimensionInterval>& intervals) {
  const std::int64_t blocks = segment.blocks;
  const std::int64_t block = segment.block_size;
  if (blocks % size == 0) {
    const std::int64_t per_rank = blocks / size;
    intervals.push_back({segment_start + rank * per_rank * block, per_rank * block, 1, 0});
  } else if (size % blocks == 0) {
    const std::int64_t replicas = size / blocks;
    intervals.push_back(
        {segment_start + (rank / replicas) * block, block, replicas, rank % replicas});
  } else {
    STRATA_CHECK(block == 1 && blocks >= size,
                 "{} blocks of {} cannot be split over {} ranks: neither divides the other", blocks,
                 block, size);
    const std::int64_t first = rank * blocks / size;
    const std::int64_t last = (rank + 1) * blocks / size;
    intervals.push_back({segment_start + first, last - first, 1, 0});
  }
}

}  // namespace

std::vector<DimensionInterval> shard_intervals(const Placement& placement,
                                               std::int64_t dimension_size, std::int64_t rank,
                                               std::int64_t size) {
  STRATA_CHECK(size >= 1 && rank >= 0 && rank < size, "rank {} of {}", rank, size);
  if (placement.kind != PlacementKind::shard || size == 1) {
    return {DimensionInterval{0, dimension_size, 1, 0}};
  }
  std::vector<DimensionInterval> intervals;
  if (placement.segments.empty()) {
    segment_intervals({dimension_size, 1}, 0, rank, size, intervals);
    return intervals;
  }
  std::int64_t start = 0;
  for (const ShardSegment& segment : placement.segments) {
    segment_intervals(segment, start, rank, size, intervals);
    start += segment.blocks * segment.block_size;
  }
  STRATA_CHECK(start == dimension_size, "segments cover {} of a dimension of {}", start,
               dimension_size);
  return intervals;
}

Shape local_shape(const Shape& global_shape, const Placement& placement, std::int64_t rank,
                  std::int64_t size) {
  if (placement.kind != PlacementKind::shard) return global_shape;
  STRATA_CHECK(placement.dim >= 0 && placement.dim < static_cast<int>(global_shape.size()),
               "shard dimension {} of a {} tensor", placement.dim, shape_to_string(global_shape));
  Shape shape = global_shape;
  std::int64_t length = 0;
  for (const DimensionInterval& interval : shard_intervals(
           placement, global_shape[static_cast<std::size_t>(placement.dim)], rank, size)) {
    length += interval.length;
  }
  shape[static_cast<std::size_t>(placement.dim)] = length;
  return shape;
}

std::vector<ElementRun> local_element_runs(const Shape& global_shape, const Placement& placement,
                                           std::int64_t rank, std::int64_t size) {
  const std::int64_t total = shape_numel(global_shape);
  if (placement.kind != PlacementKind::shard || size == 1) {
    return {ElementRun{0, 0, total, 1, 0}};
  }
  const auto dim = static_cast<std::size_t>(placement.dim);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= global_shape[d];
  for (std::size_t d = dim + 1; d < global_shape.size(); ++d) inner *= global_shape[d];
  const std::int64_t dimension = global_shape[dim];
  const std::vector<DimensionInterval> intervals =
      shard_intervals(placement, dimension, rank, size);
  std::vector<ElementRun> runs;
  std::int64_t local = 0;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (const DimensionInterval& interval : intervals) {
      const ElementRun run{(o * dimension + interval.global_start) * inner, local,
                           interval.length * inner, interval.replicas, interval.replica_index};
      if (run.length == 0) continue;
      ElementRun* last = runs.empty() ? nullptr : &runs.back();
      if (last != nullptr && last->global_offset + last->length == run.global_offset &&
          last->replicas == run.replicas && last->replica_index == run.replica_index) {
        last->length += run.length;
      } else {
        runs.push_back(run);
      }
      local += run.length;
    }
  }
  return runs;
}

}  // namespace strata::executor
