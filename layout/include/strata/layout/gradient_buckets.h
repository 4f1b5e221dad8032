// The gradient buckets of a rank: how the parameters it holds group into the buckets that data
// parallelism reduces and ZeRO shards. One rule, computed from the parameter table and the rank's
// coordinates: the executor's sharded optimizer reduces these buckets, its checkpoint files are
// laid out by them, and the cost models price these same buckets (no re-derivation from counts,
// so prediction and run cannot drift apart).
//
// The size is the plan's gradient_bucket_elements (`strata train --bucket-size`; absent:
// Megatron-LM's default max(40M, 1M·dp·cp) parameters). Walking back from the head (the order
// gradients become ready), a bucket closes once it holds that many elements, after every unit
// under ZeRO-3 (which gathers and frees each unit on its own), before a unit of another pipeline
// stage or one the rank does not hold, and around a word embedding tied across a pipeline. Where
// the mesh splits the routed experts (ep·etp > 1) their gradients are reduced over another group,
// so each bucket is then cut where routed experts begin or end: the pieces of a MoE layer are
// buckets of their own. Each bucket is padded to a multiple of the ranks that share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "strata/layout/parameter_table.h"
#include "strata/schemas/plan.h"

namespace strata::layout {

// Megatron-LM's --ddp-bucket-size default for `data_parallel_shards` = dp·cp ranks.
std::int64_t default_gradient_bucket_elements(std::int64_t data_parallel_shards);

// The plan's bucket size: its field, or the default for its dp·cp.
std::int64_t gradient_bucket_elements(const schemas::Plan& plan);

// The units of one bucket, inclusive, in forward order.
struct UnitBucket {
  std::size_t first_unit = 0, last_unit = 0;
  bool operator==(const UnitBucket&) const = default;
};

// Buckets of a run of consecutive units (`unit_elements`, forward order) that may share one:
// walking back from the last unit, a bucket closes at the first unit that brings it to
// `bucket_elements`, after every unit when `bucket_per_unit`, and at the run's first unit.
std::vector<UnitBucket> group_units_into_buckets(std::span<const std::int64_t> unit_elements,
                                                 std::int64_t bucket_elements,
                                                 bool bucket_per_unit);

// Whether a mesh reduces the routed experts' gradients apart from the rest: when ep·etp splits
// them, over the expert data-parallel group (and ZeRO-shards them over the expert shard group).
bool experts_reduced_apart(const schemas::Mesh& mesh);

// Where a rank sits on the axes that split parameters.
struct RankCoordinates {
  std::int64_t tp_rank = 0, tp = 1;
  std::int64_t ep_rank = 0, ep = 1;
  std::int64_t etp_rank = 0, etp = 1;
};

// The axes that split `spec` with this rank's place on each: ep's range of experts and etp's part
// of each expert's width for the routed experts, tensor parallelism for the rest.
std::vector<AxisSplit> rank_splits(const ParameterSpec& spec, const RankCoordinates& rank);

// One parameter as a rank holds it: `spec` indexes the specs it was computed from; offset and
// elements place it in the rank's flat layout (the specs' order, one after another).
struct HeldParameter {
  std::size_t spec = 0;
  std::int64_t unit = 0;
  std::int64_t offset = 0, elements = 0;
  bool routed_expert = false;
};
std::vector<HeldParameter> held_parameters(const schemas::ModelConfig& model,
                                           std::span<const ParameterSpec> specs,
                                           const RankCoordinates& rank);

// Which of a rank's stages (its chunks, in order) computes each unit: unit 0 goes to the first
// stage holding it (one stage may hold both the embedding and the LM head); −1 where the rank
// holds none of a unit.
std::vector<int> rank_unit_stages(const schemas::ModelConfig& model,
                                  std::span<const schemas::PipelineStage> stages);

// What the rule needs beyond the parameters: the ZeRO stage, the bucket size, the ranks that
// share a bucket (the ZeRO shard group: zero_shard_dp·cp) and a bucket of routed experts (the
// expert shard group; 0 when the experts are not reduced apart), and whether the word embedding
// is a bucket of its own (tied across a pipeline).
struct BucketRule {
  std::int64_t zero_stage = 0;
  std::int64_t bucket_elements = 40'000'000;
  std::int64_t dp = 1;
  std::int64_t expert_dp = 0;
  bool tied_word_embedding_bucket = false;
};

// The rule of a plan's mesh for a rank that holds the word embedding (`holds_word_embedding`).
BucketRule bucket_rule(const schemas::Mesh& mesh, const schemas::ModelConfig& model,
                       std::int64_t zero_stage, std::int64_t bucket_elements,
                       bool holds_word_embedding);

struct GradientBucket {
  std::int64_t first_unit = 0, last_unit = 0;  // the units it holds elements of, forward order
  std::int64_t begin = 0, elements = 0;        // in the rank's flat layout
  std::int64_t padded = 0, shard = 0;          // padded = shard × (the ranks sharing it)
  std::int64_t shard_offset = 0;               // of this rank's share in the shard buffers
  bool experts = false;                        // routed experts reduced apart
  bool operator==(const GradientBucket&) const = default;
};

// A rank's buckets in forward order. `held` in flat order; `unit_stage` gives the rank's stage
// (its chunk) computing each unit, −1 where it holds none.
std::vector<GradientBucket> gradient_buckets(std::span<const HeldParameter> held,
                                             std::span<const int> unit_stage,
                                             const BucketRule& rule);

// The buckets of one pipeline stage of `plan` on the first rank of its tp, ep and etp groups:
// what the cost models price for the stage.
std::vector<GradientBucket> stage_gradient_buckets(const schemas::Plan& plan,
                                                   const schemas::PipelineStage& stage);

}  // namespace strata::layout
