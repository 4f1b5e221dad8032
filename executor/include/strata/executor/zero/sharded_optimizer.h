// ShardedOptimizer: a run's gradient reduction and optimizer step — data parallelism with ZeRO
// stage 0 to 3 over the dp group, on top of tensor parallelism — as the model's unit hooks, driven
// by the pipeline runtime's actions. Used by the trainer for every plan: on one rank it is ZeRO-0
// over groups of one, whose reductions are no-ops and whose step is the one-device AdamW driver
// (optimizer_step: fused on the GPU).
//
// The model's parameters (this rank's tensor-parallel slices, in store order) form units — the
// embeddings, each layer, the head — and units form buckets: consecutive units, collected from the
// head backwards until a bucket holds bucket_elements (Megatron's --ddp-bucket-size); under ZeRO-3
// every unit is a bucket, as each is gathered and freed on its own. Each bucket is padded to a
// multiple of dp elements and dp rank d owns its d-th 1/dp (Megatron's distributed optimizer
// layout): padding never silently unshards a bucket that dp does not divide. Under expert
// parallelism the routed experts of a MoE layer are buckets of their own (a layer's unit then lies
// in several), reduced over the expert data-parallel group and sharded over its ZeRO blocks
// (Megatron-Core's expert distributed optimizer), the rest over dp × cp as without experts.
//
//   stage 0  every rank holds values, gradients and AdamW moments; each bucket's gradients are
//            all-reduced over dp once the last micro-batch's backward is done with it
//            (asynchronously, overlapping the rest of the backward, with overlap_grad_reduce).
//   stage 1  moments sharded: gradients are reduce-scattered, AdamW updates this rank's share
//            of the fp32 values, and the shares are all-gathered back into every rank's values.
//   stage 2  gradients sharded too: a bucket's gradients live in a transient buffer during each
//            micro-batch's backward and are reduce-scattered into this rank's share at its end.
//   stage 3  values sharded too: a unit's values are all-gathered into a transient buffer before
//            its forward, freed after, and gathered again for its backward.
//
// Before the dp reduction a bucket's tensor-parallel partial sums are completed: the gradients of
// parameters replicated over a token-sharded (sequence-parallel) tp group, and of blocks
// replicated over tp ranks (kv heads when tp exceeds them). The global gradient norm sums each
// element's square exactly once: on the rank that owns it among its tp replicas and, where
// gradients are replicated over dp (stage 0), on dp rank 0 only; then one all-reduce over the job.
//
// The runtime's actions: the model holds this rank's stages (one without a pipeline); a bucket
// never spans two of them, so that each stage's REDUCE_GRAD reduces exactly its own gradients.
// Stages 0 and 1 reduce a bucket when the runtime says: as soon as its backward is done once
// arm_reductions() has been called for its stage (before the stage's last backward, to overlap the
// rest of it), or at the stage's REDUCE_GRAD (reduce_units), or at the step's end. Stages 2 and 3
// reduce-scatter a bucket whenever the last holder of its transient gradients lets go: after each
// micro-batch's backward, or after a split backward's W pass when the runtime holds the units'
// gradients from I to W. With tied embeddings split over the first and last stage, the word
// embedding is a bucket of its own, its gradients stay whole through the step (held from
// begin_step) and tie_embedding_gradients() all-reduces them over the embedding group before their
// data-parallel reduction; the last stage's copy is left out of the norm.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/executor/distributed/process_groups.h"
#include "strata/executor/model/transformer.h"
#include "strata/executor/optim/adamw.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/executor/zero/bucket_layout.h"

namespace strata::executor {

struct ShardingOptions {
  std::int64_t zero_stage = 0;
  bool overlap_grad_reduce = true;
  std::int64_t bucket_elements = 40'000'000;  // the plan's (layout/gradient_buckets.h)
  // False when a checkpoint or an llm.c file fills the ZeRO-3 value shards right after
  // construction (see TransformerOptions::initialize_values).
  bool initialize_values = true;
};

class ShardedOptimizer final : public ParameterUnitHooks {
 public:
  // Installs itself as `model`'s unit hooks. Under ZeRO-3 the model's store owns no values and
  // this rank's shards are initialised here from `seed` (the same elements one device draws).
  ShardedOptimizer(Transformer& model, ProcessGroups& groups, ShardingOptions options,
                   std::uint64_t seed);
  ~ShardedOptimizer() override;

  // Before a step's first micro-batch: zeroes the gradients.
  void begin_step();
  // After the last micro-batch (STEP): waits for reductions in flight and runs those still to run.
  void finish_gradients();

  // Before a stage's last backward (B or W): its buckets reduce as their backward completes
  // (stages 0 and 1 with overlap_grad_reduce).
  void arm_reductions(const std::vector<std::int64_t>& units);
  // REDUCE_GRAD: starts the reduction of every bucket of these units not yet reduced (stages 0
  // and 1; stages 2 and 3 reduced them after each backward).
  void reduce_units(const std::vector<std::int64_t>& units);
  // TIED_GRAD: sums the word embedding's gradient (with MTP, every embedding parameter's) over
  // `embedding_group` (the first and last stage), then reduces its bucket over dp.
  void tie_embedding_gradients(Communicator& embedding_group);
  // Clipping to max_gradient_norm (≤ 0: none) and AdamW step t = step + 1; returns the global
  // gradient norm before clipping.
  double step(double learning_rate, std::int64_t step, const AdamWConfig& config,
              double max_gradient_norm);
  // value += delta for a parameter that moves by a rule of its own, not by its gradient (a
  // router's expert bias: its gradient is zero, so AdamW leaves it where it is): on every rank,
  // the same delta, into the master value wherever this rank keeps it — its ZeRO-3 shard's
  // elements of the entry, or the whole values.
  void add_to_parameter(ParameterEntry& entry, const std::vector<double>& delta);

  // The whole parameters, assembled from every rank's slices and shards (collective over the
  // job): into `whole`, a store of transformer_parameters() on one rank.
  void gather_values(ParameterStore& whole);
  // Sets this rank's values from whole parameters (e.g. an llm.c file read on every rank).
  void scatter_values(const ParameterStore& whole);

  // The state a checkpoint holds, as this rank keeps it: its values (all of them below ZeRO-3,
  // its shards at 3) and its AdamW moments (all, or its shards from ZeRO-1 on).
  std::vector<Tensor> values_state();
  std::vector<Tensor> moments_state();
  // After values_state() was written from outside (a checkpoint read): the 16-bit working copy
  // follows (ZeRO-3's values are gathered, and their copy made, when a unit runs).
  void values_written();
  // Frees every gradient buffer (the store's, the shards', the buckets'): an optimizer whose run
  // is leaving its layout, kept for values_state() and moments_state() alone.
  void release_gradients();
  // Frees the first (0) or second (1) half of the AdamW moments once a layout switch has moved it:
  // the optimizer leaving its layout cannot step again.
  void release_moments(std::size_t half);

  std::int64_t zero_stage() const { return options_.zero_stage; }
  std::size_t bucket_count() const { return buckets_.size(); }

  void acquire_values(std::int64_t unit) override;
  void release_values(std::int64_t unit) override;
  void acquire_gradients(std::int64_t unit) override;
  void release_gradients(std::int64_t unit) override;

 private:
  struct Bucket : BucketRange {
    Tensor gradient_buffer;  // stage 2/3: the transient padded gradients during a backward
    Tensor value_buffer;     // stage 3: the transient padded values while a unit runs
    int value_references = 0;
    bool reduced = false;  // this step's (stage 0/1) or micro-batch's (2/3) reduction started
    bool armed = false;    // pipelines: reduce as soon as its backward is done
    // Per unit first_unit..last_unit: its backward is done in the current micro-batch (stages
    // 2/3) or since the bucket was armed (0/1). Kept per bucket: a MoE layer's unit lies in
    // several buckets when expert parallelism cuts it, and each counts it done on its own.
    std::vector<bool> backward_done;
  };
  struct UnitState {
    std::vector<std::size_t> buckets;  // the buckets holding its elements
    int gradient_references = 0;
  };

  // Elements [first, last) of an entry (entry-relative) that fall in this rank's share of a
  // bucket, and where they sit in the shard buffers.
  struct OwnedSlice {
    std::int64_t first = 0, last = 0, shard_at = 0;
  };
  // Calls visit(entry, slice) for each entry's part of this rank's share of `bucket`: the walk
  // every ZeRO ≥ 1 pass over shards (initialisation, the update, scattering values) makes.
  template <class Visit>
  void for_each_owned_slice(const Bucket& bucket, Visit&& visit);
  void build_buckets();
  void initialise_value_shards(std::uint64_t seed);
  void bind_values(Bucket& bucket);
  void unbind_values(Bucket& bucket);
  void bind_gradients(Bucket& bucket);
  void unbind_gradients(Bucket& bucket);
  void bucket_finished(Bucket& bucket);
  void complete_tensor_parallel_sums(Bucket& bucket);
  void reduce(Bucket& bucket);
  // The groups a bucket's state is sharded over and replicated across, and this rank's place in
  // them: the expert ZeRO groups for a bucket of routed experts, the dense ones otherwise.
  Communicator& shard_group(const Bucket& bucket);
  Communicator& replica_group(const Bucket& bucket);
  std::int64_t shard_rank(const Bucket& bucket) const;
  Tensor bucket_gradients(Bucket& bucket);  // the bucket's unpadded gradients, flat
  Tensor shard_of(Tensor& flat, const Bucket& bucket) const;
  double owned_sum_of_squares();

  Transformer& model_;
  ParameterStore& store_;
  ProcessGroups& groups_;
  ShardingOptions options_;
  // This rank's place in its ZeRO shard group (the dp × cp group without hybrid sharding), and
  // whether it is the first of the replicas holding its shard (hybrid sharding: the one counted
  // in the gradient norm).
  std::int64_t shard_group_size_ = 1, shard_rank_ = 0;
  bool first_replica_ = true;
  // The same for the routed experts' buckets under expert parallelism (the expert data-parallel
  // group's blocks).
  std::int64_t expert_shard_rank_ = 0;
  bool expert_first_replica_ = true;
  // One rank of ZeRO-0 holds every gradient of the job once, in the store: the norm needs no sum
  // over ranks, and the step is optimizer_step's (on any device).
  bool one_device_step_ = false;
  // Expert parallelism splits the routed experts over ep ranks: they form buckets of their own,
  // whose gradients are summed over the expert data-parallel group (not dp × cp) and whose state
  // ZeRO shards over the expert shard group.
  bool experts_apart_ = false;
  // Pipelines with tied embeddings split over stages: this rank holds the word embedding (as the
  // embedding, the LM head, or both), held whole until the tie; counted in the norm only where
  // the embedding stage is.
  bool ties_embedding_ = false;
  bool counts_word_embedding_ = true;
  std::vector<Bucket> buckets_;  // forward order
  std::vector<UnitState> units_;
  std::vector<CommunicationRequest> in_flight_;
  // From ZeRO-1 on: this rank's shares, concatenated over buckets (moments; gradients from 1,
  // values from 3). Below: full-size moments in the store's flat layout.
  Tensor value_shards_, gradient_shards_;
  OptimizerMoments moments_;
  // ZeRO-2/3: where a bucket's reduce-scatter lands before it is added to its shard (one largest
  // shard, reused by every bucket and micro-batch instead of allocated per reduction).
  Tensor reduced_part_;
};

}  // namespace strata::executor
