// Placement: how a parameter is laid over the ranks of one mesh axis, in the DTensor sense —
// Replicate (every rank holds all of it) or Shard(dim) (each rank holds a slice of one dimension).
// DTensor's third placement, Partial (each rank holds a summand, pending a reduction), is never a
// parameter's: it is the state of some gradients — a replicated parameter fed by token shards
// (sequence parallelism) or a kv head replicated over tp ranks — and follows from the table, so
// ShardedOptimizer::complete_tensor_parallel_sums derives it instead of it being declared. Used by
// the model's parameter table (parameter_table.h), from which shard shapes, the elements a rank
// owns, shard initialisation, checkpoint slicing and ZeRO's flattening all follow.
//
// A sharded dimension may be a concatenation of segments split separately — the fused qkv
// projection is [q heads | k heads | v heads], and each rank takes its heads of each — and a
// segment is split by whole blocks (a head is head_dim rows):
//   - blocks divisible by the group size n: rank r takes blocks [r·b/n, (r+1)·b/n);
//   - n a multiple of blocks (kv heads when tp exceeds them): each block on n/b neighbouring
//     ranks, rank r taking block r/(n/b) — a replicated block, whose gradient is Partial over
//     those n/b ranks;
//   - otherwise, blocks of one element (a vocabulary of 50,257 rows over 2 ranks): the first
//     ranks take one block more — rank r takes [⌊r·b/n⌋, ⌊(r+1)·b/n⌋).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata::layout {

// A tensor's dimensions, outermost first (the executor's tensors use the same type).
using Shape = std::vector<std::int64_t>;

enum class PlacementKind { replicate, shard };

struct ShardSegment {
  std::int64_t blocks = 0;
  std::int64_t block_size = 1;  // elements of the sharded dimension per block
};

struct Placement {
  PlacementKind kind = PlacementKind::replicate;
  int dim = 0;  // shard only
  // Shard only: the dimension's segments in order; empty means one segment of blocks of 1.
  std::vector<ShardSegment> segments;

  static Placement replicate() { return {}; }
  static Placement shard(int dim, std::vector<ShardSegment> segments = {}) {
    return {PlacementKind::shard, dim, std::move(segments)};
  }
  bool operator==(const Placement&) const = default;
};

// One contiguous interval of a sharded dimension held by a rank.
struct DimensionInterval {
  std::int64_t global_start = 0;  // index in the whole dimension
  std::int64_t length = 0;
  std::int64_t replicas = 1;       // ranks holding the same interval (1: this rank alone)
  std::int64_t replica_index = 0;  // this rank's place among them
};

// The intervals of the sharded dimension (of `dimension_size` elements) that `rank` of `size`
// holds, in order; they make up its local dimension. A Replicate placement gives the whole.
std::vector<DimensionInterval> shard_intervals(const Placement& placement,
                                               std::int64_t dimension_size, std::int64_t rank,
                                               std::int64_t size);

// The shape `rank` of `size` holds of a tensor of `global_shape`.
Shape local_shape(const Shape& global_shape, const Placement& placement, std::int64_t rank,
                  std::int64_t size);

// A run of row-major elements that are contiguous both in the rank's local tensor and in the
// global tensor.
struct ElementRun {
  std::int64_t global_offset = 0;
  std::int64_t local_offset = 0;
  std::int64_t length = 0;
  std::int64_t replicas = 1;  // as in DimensionInterval: > 1 for a replicated block
  std::int64_t replica_index = 0;
};

// The local tensor as runs of the global one, in local order, covering it exactly once
// (adjacent runs merged).
std::vector<ElementRun> local_element_runs(const Shape& global_shape, const Placement& placement,
                                           std::int64_t rank, std::int64_t size);

// A parameter split along two mesh axes at once — a MoE layer's stacked routed experts, whose
// expert dimension ep splits and whose width etp splits (Megatron-Core's expert tensor
// parallelism): each axis's placement with this rank's place in that axis's group. Shards must
// be of different dimensions; at most one axis may replicate blocks.
struct AxisSplit {
  const Placement* placement = nullptr;
  std::int64_t rank = 0, size = 1;
};
Shape local_shape(const Shape& global_shape, std::span<const AxisSplit> splits);
// Each dimension's intervals this rank holds, in local order: the whole dimension where no axis
// splits it.
std::vector<std::vector<DimensionInterval>> held_intervals(const Shape& global_shape,
                                                           std::span<const AxisSplit> splits);
std::vector<ElementRun> local_element_runs(const Shape& global_shape,
                                           std::span<const AxisSplit> splits);

}  // namespace strata::layout
