// BucketLayout: a rank's gradient buckets (layout/gradient_buckets.h: the one rule, computed from
// the parameter table and the rank's coordinates, which the cost models price too) with what the
// executor adds to each: the store entries it holds and the elements this rank counts in the
// gradient norm. The sharded optimizer runs on it; a checkpoint's files are laid out by it (a ZeRO
// shard file is the rank's shares of its buckets, one after another), so resharding computes it
// for any rank of any layout without building that rank's model.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "strata/executor/model/parameter_store.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"

namespace strata::executor {

struct BucketRange : layout::GradientBucket {
  std::vector<std::size_t> entries;  // indices into the store's entries
  // Bucket-relative ranges of elements whose square this rank counts in the gradient norm among
  // its tp replicas (the optimizer counts them on one rank of the group that shares the bucket).
  std::vector<std::pair<std::int64_t, std::int64_t>> owned;
};

struct BucketLayoutOptions {
  layout::BucketRule rule;
  bool counts_word_embedding = true;  // false: the last stage's copy of a tied embedding
};

// The rank's buckets in forward order: the store's parameters, at the coordinates its options
// name, grouped by `options.rule`; `unit_stage` is the rank's stage of each unit, −1 where it
// holds none. The store's layout must be the parameter table's for those coordinates.
std::vector<BucketRange> bucket_layout(const schemas::ModelConfig& model,
                                       const ParameterStore& store,
                                       const std::vector<int>& unit_stage,
                                       const BucketLayoutOptions& options);

// The buckets of the rank holding `stages` (its chunks, in order) in `store`, under `mesh`'s rule
// with the plan's ZeRO stage and bucket size: what the sharded optimizer reduces and shards and a
// checkpoint's files are laid out by. A stage's units stay in buckets of that stage; the last
// stage's copy of a tied word embedding is counted in the norm by the first stage.
std::vector<BucketRange> rank_bucket_layout(const schemas::ModelConfig& model,
                                            const ParameterStore& store,
                                            const std::vector<schemas::PipelineStage>& stages,
                                            const schemas::Mesh& mesh, std::int64_t zero_stage,
                                            std::int64_t bucket_elements);

}  // namespace strata::executor
