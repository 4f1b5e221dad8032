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
  std::int64_t first_unit = 0, last_unit = 0;  // the units it holds elements of, forward order
  std::int64_t begin = 0, elements = 0;        // in the store's flat layout
  std::int64_t padded = 0, shard = 0;          // padded = shard × (the ranks sharing it)
  std::int64_t shard_offset = 0;               // of this rank's share in the shard buffers
  std::vector<std::size_t> entries;            // indices into the store's entries
  // Expert parallelism: a bucket of routed experts only (split over ep), summed over the expert
  // data-parallel group and ZeRO-sharded over the expert shard group; every other bucket holds
  // none of them and goes over dp × cp and the dense shard group.
  bool experts = false;
  // Bucket-relative ranges of elements whose square this rank counts in the gradient norm among
  // its tp replicas (the optimizer counts them on one rank of the group that shares the bucket).
  std::vector<std::pair<std::int64_t, std::int64_t>> owned;
};

struct BucketLayoutOptions {
  std::int64_t zero_stage = 0;
  std::int64_t bucket_elements = 40'000'000;
  std::int64_t dp = 1;  // ranks that share each bucket (the ZeRO shard group's size)
  // Expert (or expert tensor) parallelism: the ranks that share each bucket of routed experts
  // (the expert ZeRO shard group's size); 0 without it, when the experts share buckets with the
  // rest.
  std::int64_t expert_dp = 0;
  std::int64_t tp_rank = 0;  // replicated tensors are counted in the norm by tp rank 0
  // A routed expert's tensor whole on every etp rank (its output bias) is counted by etp rank 0.
  std::int64_t expert_tp_rank = 0;
  bool pipeline = false;                    // units this rank does not hold are allowed
  bool tied_word_embedding_bucket = false;  // the word embedding is a bucket of its own
  bool counts_word_embedding = true;        // false: the last stage's copy of a tied embedding
};

// From the head backwards (the order gradients become ready), a bucket closes once it holds
// bucket_elements; under ZeRO-3 after every unit; before a unit of another stage (`unit_stage`:
// the rank's stage of each unit, −1 where it holds none) or one this rank does not hold; and
// around a tied word embedding when asked. With expert_dp, each bucket is then cut where routed
// experts begin or end, so that no bucket mixes them with the rest: the pieces of a MoE layer are
// buckets of their own, and a unit may lie in several. Each bucket is padded to a multiple of the
// ranks that share it (dp, or expert_dp for experts).
std::vector<BucketRange> bucket_layout(const schemas::ModelConfig& model,
                                       const ParameterStore& store,
                                       const std::vector<int>& unit_stage,
                                       const BucketLayoutOptions& options);

}  // namespace strata::executor
