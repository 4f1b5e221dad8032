#include "strata/executor/zero/bucket_layout.h"

#include <algorithm>

#include "strata/executor/check.h"

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
  const std::vector<ParameterEntry>& entries = store.entries();
  const std::vector<ParameterSpec> specs = store.specs();
  const std::vector<layout::HeldParameter> held =
      layout::held_parameters(model, specs, store.options().coordinates());
  for (std::size_t e = 0; e < entries.size(); ++e) {
    STRATA_CHECK(
        held[e].offset == entries[e].offset && held[e].elements == shape_numel(entries[e].shape),
        "{}: the store lays it out other than the parameter table", specs[e].name);
  }
  const std::int64_t tp_rank = store.options().tensor_parallel_rank;
  const std::int64_t expert_tp_rank = store.options().expert_tensor_parallel_rank;
  std::vector<BucketRange> buckets;
  for (const layout::GradientBucket& grouped :
       layout::gradient_buckets(held, unit_stage, options.rule)) {
    BucketRange bucket;
    static_cast<layout::GradientBucket&>(bucket) = grouped;
    for (std::size_t e = 0; e < entries.size(); ++e) {
      const ParameterEntry& entry = entries[e];
      if (entry.offset < bucket.begin || entry.offset >= bucket.begin + bucket.elements) continue;
      bucket.entries.push_back(e);
      // The last stage's copy of the embedding (a tied head's, MTP's): the first stage counts it.
      if (!options.counts_word_embedding && entry.spec.name.starts_with("embedding.")) continue;
      // Which elements this rank counts in the norm among its tp replicas: a sharded tensor's
      // own blocks (the first of a replicated block's holders), a replicated tensor on tp rank 0.
      // Routed experts kept apart are counted among the ranks holding the same experts (the
      // expert data-parallel group, which may include tp peers), so every tp rank offers its own
      // — its part of their width under etp, the first etp rank what etp does not split.
      const bool sharded = entry.spec.tensor_parallel.kind == PlacementKind::shard;
      const bool counted_here =
          bucket.experts ? (entry.spec.expert_tensor_parallel.kind == PlacementKind::shard ||
                            expert_tp_rank == 0)
                         : tp_rank == 0;
      for (const ElementRun& run : entry.runs) {
        const bool owned = sharded ? run.replica_index == 0 : counted_here;
        if (!owned) continue;
        append_range(bucket.owned, entry.offset - bucket.begin + run.local_offset, run.length);
      }
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

std::vector<BucketRange> rank_bucket_layout(const schemas::ModelConfig& model,
                                            const ParameterStore& store,
                                            const std::vector<schemas::PipelineStage>& stages,
                                            const schemas::Mesh& mesh, std::int64_t zero_stage,
                                            std::int64_t bucket_elements) {
  const std::vector<int> unit_stage = layout::rank_unit_stages(model, stages);
  const bool embedding_stage =
      std::any_of(stages.begin(), stages.end(), [](const auto& stage) { return stage.embedding; });
  const layout::BucketRule rule = layout::bucket_rule(mesh, model, zero_stage, bucket_elements,
                                                      store.contains("embedding.word"));
  return bucket_layout(
      model, store, unit_stage,
      {.rule = rule, .counts_word_embedding = !rule.tied_word_embedding_bucket || embedding_stage});
}

}  // namespace strata::executor
