// BucketLayout: how a rank's parameters group into the buckets that data parallelism reduces and
// ZeRO shards — a pure function of the rank's parameter store and the plan's sharding options.
// The sharded optimizer runs on it; a checkpoint's files are laid out by it (a ZeRO shard file is
// the rank's shares of its buckets, one after another), so resharding computes it for any rank
// of any layout without building that rank's model.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "strata/executor/model/parameter_store.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

struct BucketRange {
  std::int64_t first_unit = 0, last_unit = 0;  // inclusive, forward order
  std::int64_t begin = 0, elements = 0;        // in the store's flat layout
  std::int64_t padded = 0, shard = 0;          // padded = shard × dp
  std::int64_t shard_offset = 0;               // of this rank's share in the shard buffers
  std::vector<std::size_t> entries;            // indices into the store's entries
  // Bucket-relative ranges of elements whose square this rank counts in the gradient norm among
  // its tp replicas: of the dense entries in `owned`, of the routed experts (split over ep) in
  // `expert_owned` — the optimizer counts those on the first rank of each data-parallel group
  // that holds them, dp × cp for the dense ones and the expert data-parallel group for experts.
  std::vector<std::pair<std::int64_t, std::int64_t>> owned, expert_owned;
  // Bucket-relative ranges of the routed experts' elements: summed over the expert data-parallel
  // group, the rest of the bucket over dp × cp.
  std::vector<std::pair<std::int64_t, std::int64_t>> expert;
};

struct BucketLayoutOptions {
  std::int64_t zero_stage = 0;
  std::int64_t bucket_elements = 40'000'000;
  std::int64_t dp = 1;       // ranks that share each bucket (dp × cp)
  std::int64_t tp_rank = 0;  // replicated tensors are counted in the norm by tp rank 0
  bool pipeline = false;     // units this rank does not hold are allowed
  bool tied_word_embedding_bucket = false;  // the word embedding is a bucket of its own
  bool counts_word_embedding = true;        // false: the last stage's copy of a tied embedding
};

// From the head backwards (the order gradients become ready), a bucket closes once it holds
// bucket_elements; under ZeRO-3 after every unit; before a unit of another stage (`unit_stage`:
// the rank's stage of each unit, −1 where it holds none) or one this rank does not hold; and
// around a tied word embedding when asked. Each bucket is padded to a multiple of dp.
std::vector<BucketRange> bucket_layout(const schemas::ModelConfig& model,
                                       const ParameterStore& store,
                                       const std::vector<int>& unit_stage,
                                       const BucketLayoutOptions& options);

}  // namespace strata::executor
