#include "strata/layout/placement.h"

#include <fmt/ranges.h>

#include "layout_check.h"

namespace strata::layout {
namespace {

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t elements = 1;
  for (const std::int64_t extent : shape) elements *= extent;
  return elements;
}

std::string shape_to_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

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
    STRATA_LAYOUT_CHECK(block == 1 && blocks >= size,
                        "{} blocks of {} cannot be split over {} ranks: neither divides the other",
                        blocks, block, size);
    const std::int64_t first = rank * blocks / size;
    const std::int64_t last = (rank + 1) * blocks / size;
    intervals.push_back({segment_start + first, last - first, 1, 0});
  }
}

}  // namespace

std::vector<DimensionInterval> shard_intervals(const Placement& placement,
                                               std::int64_t dimension_size, std::int64_t rank,
                                               std::int64_t size) {
  STRATA_LAYOUT_CHECK(size >= 1 && rank >= 0 && rank < size, "rank {} of {}", rank, size);
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
  STRATA_LAYOUT_CHECK(start == dimension_size, "segments cover {} of a dimension of {}", start,
                      dimension_size);
  return intervals;
}

Shape local_shape(const Shape& global_shape, const Placement& placement, std::int64_t rank,
                  std::int64_t size) {
  const AxisSplit split{&placement, rank, size};
  return local_shape(global_shape, std::span<const AxisSplit>(&split, 1));
}

std::vector<ElementRun> local_element_runs(const Shape& global_shape, const Placement& placement,
                                           std::int64_t rank, std::int64_t size) {
  const AxisSplit split{&placement, rank, size};
  return local_element_runs(global_shape, std::span<const AxisSplit>(&split, 1));
}

std::vector<std::vector<DimensionInterval>> held_intervals(const Shape& global_shape,
                                                           std::span<const AxisSplit> splits) {
  std::vector<std::vector<DimensionInterval>> held(global_shape.size());
  std::vector<bool> split_dimension(global_shape.size(), false);
  for (std::size_t d = 0; d < global_shape.size(); ++d) {
    held[d] = {DimensionInterval{0, global_shape[d], 1, 0}};
  }
  for (const AxisSplit& split : splits) {
    const Placement& placement = *split.placement;
    if (placement.kind != PlacementKind::shard) continue;
    STRATA_LAYOUT_CHECK(placement.dim >= 0 && placement.dim < static_cast<int>(global_shape.size()),
                        "shard dimension {} of a {} tensor", placement.dim,
                        shape_to_string(global_shape));
    const auto dim = static_cast<std::size_t>(placement.dim);
    STRATA_LAYOUT_CHECK(!split_dimension[dim], "two axes shard dimension {} of a {} tensor", dim,
                        shape_to_string(global_shape));
    split_dimension[dim] = true;
    held[dim] = shard_intervals(placement, global_shape[dim], split.rank, split.size);
  }
  return held;
}

Shape local_shape(const Shape& global_shape, std::span<const AxisSplit> splits) {
  const std::vector<std::vector<DimensionInterval>> held = held_intervals(global_shape, splits);
  Shape shape = global_shape;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    std::int64_t length = 0;
    for (const DimensionInterval& interval : held[d]) length += interval.length;
    shape[d] = length;
  }
  return shape;
}

std::vector<ElementRun> local_element_runs(const Shape& global_shape,
                                           std::span<const AxisSplit> splits) {
  const std::vector<std::vector<DimensionInterval>> held = held_intervals(global_shape, splits);
  // The innermost dimension any axis splits: below it every held row is contiguous.
  std::size_t last = 0;
  bool any = false;
  for (std::size_t d = 0; d < held.size(); ++d) {
    if (held[d].size() != 1 || held[d][0].length != global_shape[d]) {
      last = d;
      any = true;
    }
  }
  if (!any) return {ElementRun{0, 0, shape_numel(global_shape), 1, 0}};
  std::int64_t inner = 1;
  for (std::size_t d = last + 1; d < global_shape.size(); ++d) inner *= global_shape[d];
  std::vector<ElementRun> runs;
  std::int64_t local = 0;
  const auto emit = [&](const ElementRun& run) {
    if (run.length == 0) return;
    ElementRun* previous = runs.empty() ? nullptr : &runs.back();
    if (previous != nullptr && previous->global_offset + previous->length == run.global_offset &&
        previous->replicas == run.replicas && previous->replica_index == run.replica_index) {
      previous->length += run.length;
    } else {
      runs.push_back(run);
    }
    local += run.length;
  };
  // Row-major over the held indices of dimensions 0 … last − 1, then the held intervals of
  // `last`; `prefix` is the flat global index of the outer dimensions so far, `replicas` the
  // replicated block (if any) the path went through.
  const auto walk = [&](auto&& self, std::size_t d, std::int64_t prefix,
                        const DimensionInterval* replicated) -> void {
    for (const DimensionInterval& interval : held[d]) {
      const DimensionInterval* block = interval.replicas > 1 ? &interval : replicated;
      STRATA_LAYOUT_CHECK(!(interval.replicas > 1 && replicated != nullptr),
                          "replicated blocks along two axes of a {} tensor",
                          shape_to_string(global_shape));
      if (d == last) {
        emit(ElementRun{(prefix * global_shape[d] + interval.global_start) * inner, local,
                        interval.length * inner, block ? block->replicas : 1,
                        block ? block->replica_index : 0});
        continue;
      }
      for (std::int64_t i = 0; i < interval.length; ++i) {
        self(self, d + 1, prefix * global_shape[d] + interval.global_start + i, block);
      }
    }
  };
  walk(walk, 0, 0, nullptr);
  return runs;
}

}  // namespace strata::layout
