#include "strata/executor/zero/bucket_layout.h"

#include "strata/executor/model/parameter_units.h"
#include "strata/schemas/gradient_buckets.h"

namespace strata::executor {
namespace {

// Adds [first, first + length) to `ranges`, merged with the last range where they touch.
void append_range(std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, std::int64_t first,
                  std::int64_t length) {
  if (!ranges.empty() && ranges.back().second == first) {
    ranges.back().second += length;
  } else {
    ranges.emplace_back(first, first + length);
  }
}

}  // namespace

std::vector<BucketRange> bucket_layout(const schemas::ModelConfig& model,
                                       const ParameterStore& store,
                                       const std::vector<int>& unit_stage,
                                       const BucketLayoutOptions& options) {
  const std::int64_t unit_count = parameter_unit_count(model);
  std::vector<std::int64_t> unit_begin(static_cast<std::size_t>(unit_count), -1);
  std::vector<std::int64_t> unit_end(static_cast<std::size_t>(unit_count), -1);
  const std::vector<ParameterEntry>& entries = store.entries();
  for (const ParameterEntry& entry : entries) {
    const auto unit = static_cast<std::size_t>(parameter_unit(model, entry.spec.name));
    if (unit_begin[unit] < 0) unit_begin[unit] = entry.offset;
    STRATA_CHECK(unit_end[unit] < 0 || unit_end[unit] == entry.offset,
                 "unit {} is not contiguous in the store at {}", unit, entry.spec.name);
    unit_end[unit] = entry.offset + shape_numel(entry.shape);
  }
  // Runs of units that may share a bucket — held here, on one stage, each starting where the one
  // before ends in the store, and not across a tied word embedding kept in a bucket of its own —
  // grouped by the rule the cost models price (schemas/gradient_buckets.h).
  std::vector<BucketRange> buckets;
  const auto index = [](std::int64_t unit) { return static_cast<std::size_t>(unit); };
  for (std::int64_t first = 0; first < unit_count;) {
    if (unit_begin[index(first)] < 0) {
      STRATA_CHECK(options.pipeline, "unit {} holds no parameters", first);
      ++first;
      continue;
    }
    std::int64_t end = first + 1;
    while (end < unit_count && unit_begin[index(end)] >= 0 &&
           unit_stage[index(end)] == unit_stage[index(end - 1)] &&
           unit_begin[index(end)] == unit_end[index(end - 1)] &&
           !(options.tied_word_embedding_bucket && end == 1)) {
      ++end;
    }
    std::vector<std::int64_t> unit_elements;
    for (std::int64_t unit = first; unit < end; ++unit) {
      unit_elements.push_back(unit_end[index(unit)] - unit_begin[index(unit)]);
    }
    for (const schemas::UnitBucket& grouped : schemas::group_units_into_buckets(
             unit_elements, options.bucket_elements, options.zero_stage == 3)) {
      BucketRange bucket;
      bucket.first_unit = first + static_cast<std::int64_t>(grouped.first_unit);
      bucket.last_unit = first + static_cast<std::int64_t>(grouped.last_unit);
      buckets.push_back(std::move(bucket));
    }
    first = end;
  }
  // Element ranges of the grouped buckets; with experts apart, cut at every boundary between
  // routed experts and the rest.
  const auto routed = [](const ParameterEntry& entry) {
    return entry.spec.expert_parallel.kind == PlacementKind::shard;
  };
  std::vector<BucketRange> pieces;
  for (const BucketRange& grouped : buckets) {
    const std::int64_t begin = unit_begin[index(grouped.first_unit)];
    const std::int64_t end = unit_end[index(grouped.last_unit)];
    BucketRange piece;
    piece.begin = begin;
    for (const ParameterEntry& entry : entries) {
      if (entry.offset < begin || entry.offset >= end || options.expert_dp == 0) continue;
      if (entry.offset > piece.begin && routed(entry) != piece.experts) {
        piece.elements = entry.offset - piece.begin;
        pieces.push_back(piece);
        piece.begin = entry.offset;
      }
      if (entry.offset == piece.begin) piece.experts = routed(entry);
    }
    piece.elements = end - piece.begin;
    pieces.push_back(piece);
  }
  std::int64_t shard_offset = 0;
  for (BucketRange& bucket : pieces) {
    const std::int64_t sharing = bucket.experts ? options.expert_dp : options.dp;
    bucket.shard = (bucket.elements + sharing - 1) / sharing;
    bucket.padded = bucket.shard * sharing;
    bucket.shard_offset = shard_offset;
    shard_offset += bucket.shard;
    bucket.first_unit = unit_count;
    bucket.last_unit = -1;
    for (std::size_t e = 0; e < entries.size(); ++e) {
      const ParameterEntry& entry = entries[e];
      if (entry.offset < bucket.begin || entry.offset >= bucket.begin + bucket.elements) continue;
      bucket.entries.push_back(e);
      const std::int64_t unit = parameter_unit(model, entry.spec.name);
      bucket.first_unit = std::min(bucket.first_unit, unit);
      bucket.last_unit = std::max(bucket.last_unit, unit);
      // The last stage's copy of a tied embedding: the first stage counts it.
      if (!options.counts_word_embedding && entry.spec.name == "embedding.word") continue;
      // Which elements this rank counts in the norm among its tp replicas: a sharded tensor's
      // own blocks (the first of a replicated block's holders), a replicated tensor on tp rank 0.
      // Routed experts kept apart are counted among the ranks holding the same experts (the
      // expert data-parallel group, which may include tp peers), so every tp rank offers its own
      // — its part of their width under etp, the first etp rank what etp does not split.
      const bool sharded = entry.spec.tensor_parallel.kind == PlacementKind::shard;
      const bool routed_apart = bucket.experts;
      const bool counted_here =
          routed_apart ? (entry.spec.expert_tensor_parallel.kind == PlacementKind::shard ||
                          options.expert_tp_rank == 0)
                       : options.tp_rank == 0;
      for (const ElementRun& run : entry.runs) {
        const bool owned = sharded ? run.replica_index == 0 : counted_here;
        if (!owned) continue;
        append_range(bucket.owned, entry.offset - bucket.begin + run.local_offset, run.length);
      }
    }
  }
  return pieces;
}

}  // namespace strata::executor
