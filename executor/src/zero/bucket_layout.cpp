#include "strata/executor/zero/bucket_layout.h"

#include "strata/executor/model/parameter_units.h"

namespace strata::executor {

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
  std::vector<BucketRange> backward_order;
  std::int64_t collected = 0;
  std::int64_t last_unit = -1;  // of the bucket being collected; −1: none open
  for (std::int64_t unit = unit_count - 1; unit >= 0; --unit) {
    const auto u = static_cast<std::size_t>(unit);
    if (unit_begin[u] < 0) {
      STRATA_CHECK(options.pipeline, "unit {} holds no parameters", unit);
      continue;
    }
    if (last_unit < 0) last_unit = unit;
    collected += unit_end[u] - unit_begin[u];
    const auto next = static_cast<std::size_t>(unit - 1);
    const bool next_elsewhere =
        unit == 0 || unit_begin[next] < 0 || unit_stage[next] != unit_stage[u] ||
        unit_end[next] != unit_begin[u] || (options.tied_word_embedding_bucket && unit == 1);
    if (options.zero_stage == 3 || collected >= options.bucket_elements || next_elsewhere) {
      BucketRange bucket;
      bucket.first_unit = unit;
      bucket.last_unit = last_unit;
      backward_order.push_back(std::move(bucket));
      last_unit = -1;
      collected = 0;
    }
  }
  std::vector<BucketRange> buckets(std::make_move_iterator(backward_order.rbegin()),
                                   std::make_move_iterator(backward_order.rend()));
  std::int64_t shard_offset = 0;
  for (BucketRange& bucket : buckets) {
    bucket.begin = unit_begin[static_cast<std::size_t>(bucket.first_unit)];
    bucket.elements = unit_end[static_cast<std::size_t>(bucket.last_unit)] - bucket.begin;
    bucket.shard = (bucket.elements + options.dp - 1) / options.dp;
    bucket.padded = bucket.shard * options.dp;
    bucket.shard_offset = shard_offset;
    shard_offset += bucket.shard;
    for (std::size_t e = 0; e < entries.size(); ++e) {
      const ParameterEntry& entry = entries[e];
      if (entry.offset < bucket.begin || entry.offset >= bucket.begin + bucket.elements) continue;
      bucket.entries.push_back(e);
      // The last stage's copy of a tied embedding: the first stage counts it.
      if (!options.counts_word_embedding && entry.spec.name == "embedding.word") continue;
      // Which elements this rank counts in the norm among its tp replicas: a sharded tensor's
      // own blocks (the first of a replicated block's holders), a replicated tensor on tp rank 0.
      const bool sharded = entry.spec.tensor_parallel.kind == PlacementKind::shard;
      for (const ElementRun& run : entry.runs) {
        const bool owned = sharded ? run.replica_index == 0 : options.tp_rank == 0;
        if (!owned) continue;
        const std::int64_t first = entry.offset - bucket.begin + run.local_offset;
        if (!bucket.owned.empty() && bucket.owned.back().second == first) {
          bucket.owned.back().second += run.length;
        } else {
          bucket.owned.emplace_back(first, first + run.length);
        }
      }
    }
  }
  return buckets;
}

}  // namespace strata::executor
