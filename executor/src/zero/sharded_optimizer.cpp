#include "strata/executor/zero/sharded_optimizer.h"

#include <algorithm>
#include <cmath>

#include "eigen_maps.h"
#include "strata/executor/distributed/typed_collectives.h"
#include "strata/executor/model/parameter_init.h"
#include "strata/executor/ops/dispatch.h"
#include "strata/executor/optim/gradient_clipping.h"

namespace strata::executor {
namespace {

Tensor flat(Tensor& tensor) { return tensor.reshaped({tensor.numel()}); }

// a += b, element-wise.
void add_into(Tensor& a, const Tensor& b) {
  dispatch_floating(a.scalar_type(), "add_into",
                    [&]<class T>() { cpu::as_vector<T>(a) += cpu::as_vector<T>(b); });
}

// On either device (a GPU's data-parallel ranks reduce their gradients in device memory).
double sum_of_squares(const Tensor& tensor, std::int64_t first, std::int64_t count) {
  const Tensor slice = tensor.view(first, {count});
  const double norm = global_gradient_norm(std::span<const Tensor>(&slice, 1));
  return norm * norm;
}

// Copies elements [first, last) of `entry`'s local slice from the whole parameter `whole` (flat)
// into destination[destination_offset …], through the entry's runs.
void copy_slice_from_whole(Tensor& destination, std::int64_t destination_offset,
                           const ParameterEntry& entry, std::int64_t first, std::int64_t last,
                           const Tensor& whole) {
  for (const ElementRun& run : entry.runs) {
    const std::int64_t begin = std::max(first, run.local_offset);
    const std::int64_t end = std::min(last, run.local_offset + run.length);
    if (begin >= end) continue;
    Tensor to = destination.view(destination_offset + (begin - first), {end - begin});
    to.copy_from(whole.view(run.global_offset + (begin - run.local_offset), {end - begin}));
  }
}

}  // namespace

ShardedOptimizer::ShardedOptimizer(Transformer& model, ProcessGroups& groups,
                                   ShardingOptions options, std::uint64_t seed)
    : model_(model), store_(model.parameters()), groups_(groups), options_(options) {
  STRATA_CHECK(options_.zero_stage >= 0 && options_.zero_stage <= 3, "ZeRO stage {}",
               options_.zero_stage);
  STRATA_CHECK(options_.bucket_elements >= 1, "a bucket of {} elements", options_.bucket_elements);
  STRATA_CHECK(store_.options().own_values == (options_.zero_stage < 3) &&
                   store_.options().own_gradients == (options_.zero_stage < 2),
               "ZeRO-{} needs a store that leaves {} to it", options_.zero_stage,
               options_.zero_stage == 3 ? "values and gradients" : "gradients");
  Communicator& shards = groups_.zero_shard();
  shard_group_size_ = shards.size();
  shard_rank_ = shards.rank();
  first_replica_ = groups_.zero_replica().rank() == 0;
  one_device_step_ = groups_.world().size() == 1 && options_.zero_stage == 0;
  experts_apart_ = groups_.expert_model_parallel().size() > 1;  // ep · etp > 1
  expert_shard_rank_ = groups_.expert_zero_shard().rank();
  expert_first_replica_ = groups_.expert_zero_replica().rank() == 0;
  // ZeRO's shards live in host memory; stage 0 keeps whole state beside the model, on its device.
  STRATA_CHECK(store_.device() == Device::cpu || options_.zero_stage == 0,
               "ZeRO-{} over {} ranks on {}: the sharded state lives in host memory",
               options_.zero_stage, groups_.world().size(), device_name(store_.device()));
  if (model_.config().last_stage_uses_word_embedding() && groups_.mesh().pp > 1 &&
      store_.contains("embedding.word")) {
    ties_embedding_ = true;
    bool embedding_stage = false;
    for (int chunk = 0; chunk < model_.stage_count(); ++chunk) {
      embedding_stage = embedding_stage || model_.stage(chunk).embedding;
    }
    counts_word_embedding_ = embedding_stage;
  }
  build_buckets();
  std::int64_t shard_elements = 0;
  for (const Bucket& bucket : buckets_) shard_elements += bucket.shard;
  const ScalarType type = store_.scalar_type();
  if (options_.zero_stage == 0) {
    moments_ = OptimizerMoments::zeros_like(store_);
  } else {
    moments_.first = Tensor::zeros({shard_elements}, type);
    moments_.second = Tensor::zeros({shard_elements}, type);
    gradient_shards_ = Tensor::zeros({shard_elements}, type);
    if (options_.zero_stage >= 2) {
      std::int64_t largest = 0;
      for (const Bucket& bucket : buckets_) largest = std::max(largest, bucket.shard);
      reduced_part_ = Tensor::zeros({largest}, type);
    }
  }
  if (options_.zero_stage == 3) {
    value_shards_ = Tensor::zeros({shard_elements}, type);
    if (options_.initialize_values) initialise_value_shards(seed);
  }
  model_.set_unit_hooks(this);
}

ShardedOptimizer::~ShardedOptimizer() { model_.set_unit_hooks(nullptr); }

void ShardedOptimizer::build_buckets() {
  const std::int64_t unit_count = parameter_unit_count(model_.config());
  std::vector<schemas::PipelineStage> stages;
  for (int chunk = 0; chunk < model_.stage_count(); ++chunk) stages.push_back(model_.stage(chunk));
  // The plan's rule (layout/gradient_buckets.h), which the cost models price as well; the groups
  // this rank was given must be the ones it names.
  const layout::BucketRule rule =
      layout::bucket_rule(groups_.mesh(), model_.config(), options_.zero_stage,
                          options_.bucket_elements, store_.contains("embedding.word"));
  const std::int64_t expert_shards =
      experts_apart_ ? groups_.expert_zero_shard().size() : std::int64_t{0};
  STRATA_CHECK(rule.dp == shard_group_size_ && rule.expert_dp == expert_shards &&
                   rule.tied_word_embedding_bucket == ties_embedding_,
               "the mesh's bucket rule (shards of {}, experts' {}) disagrees with the rank's "
               "groups ({}, {})",
               rule.dp, rule.expert_dp, shard_group_size_, expert_shards);
  for (BucketRange& range : rank_bucket_layout(model_.config(), store_, stages, groups_.mesh(),
                                               options_.zero_stage, options_.bucket_elements)) {
    Bucket bucket;
    static_cast<BucketRange&>(bucket) = std::move(range);
    bucket.backward_done.assign(static_cast<std::size_t>(bucket.last_unit - bucket.first_unit + 1),
                                false);
    buckets_.push_back(std::move(bucket));
  }
  units_.resize(static_cast<std::size_t>(unit_count));
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (std::int64_t unit = buckets_[b].first_unit; unit <= buckets_[b].last_unit; ++unit) {
      units_[static_cast<std::size_t>(unit)].buckets.push_back(b);
    }
  }
}

Communicator& ShardedOptimizer::shard_group(const Bucket& bucket) {
  return bucket.experts ? groups_.expert_zero_shard() : groups_.zero_shard();
}

Communicator& ShardedOptimizer::replica_group(const Bucket& bucket) {
  return bucket.experts ? groups_.expert_zero_replica() : groups_.zero_replica();
}

std::int64_t ShardedOptimizer::shard_rank(const Bucket& bucket) const {
  return bucket.experts ? expert_shard_rank_ : shard_rank_;
}

template <class Visit>
void ShardedOptimizer::for_each_owned_slice(const Bucket& bucket, Visit&& visit) {
  const std::int64_t low = shard_rank(bucket) * bucket.shard;
  const std::int64_t high = std::min(low + bucket.shard, bucket.elements);
  for (std::size_t e : bucket.entries) {
    ParameterEntry& entry = store_.entries()[e];
    const std::int64_t entry_begin = entry.offset - bucket.begin;
    const std::int64_t first = std::max(low, entry_begin);
    const std::int64_t last = std::min(high, entry_begin + shape_numel(entry.shape));
    if (first >= last) continue;
    visit(entry,
          OwnedSlice{first - entry_begin, last - entry_begin, bucket.shard_offset + (first - low)});
  }
}

void ShardedOptimizer::initialise_value_shards(std::uint64_t seed) {
  for (const Bucket& bucket : buckets_) {
    for_each_owned_slice(bucket, [&](const ParameterEntry& entry, const OwnedSlice& slice) {
      initialize_slice(value_shards_, slice.shard_at, entry, slice.first, slice.last, seed);
    });
  }
}

Tensor ShardedOptimizer::shard_of(Tensor& buffer, const Bucket& bucket) const {
  return buffer.view(bucket.shard_offset, {bucket.shard});
}

Tensor ShardedOptimizer::bucket_gradients(Bucket& bucket) {
  if (options_.zero_stage >= 2) return bucket.gradient_buffer.view(0, {bucket.elements});
  return store_.gradients().view(bucket.begin, {bucket.elements});
}

void ShardedOptimizer::bind_values(Bucket& bucket) {
  bucket.value_buffer = Tensor::zeros({bucket.padded}, store_.scalar_type());
  Tensor shard = shard_of(value_shards_, bucket);
  shard_group(bucket).all_gather(shard, bucket.value_buffer);
  for (std::size_t e : bucket.entries) {
    ParameterEntry& entry = store_.entries()[e];
    entry.value = bucket.value_buffer.view(entry.offset - bucket.begin, entry.shape);
    entry.compute = entry.value;
  }
}

void ShardedOptimizer::unbind_values(Bucket& bucket) {
  for (std::size_t e : bucket.entries) {
    ParameterEntry& entry = store_.entries()[e];
    entry.value = Tensor();
    entry.compute = Tensor();
  }
  bucket.value_buffer = Tensor();
}

void ShardedOptimizer::bind_gradients(Bucket& bucket) {
  bucket.gradient_buffer = Tensor::zeros({bucket.padded}, store_.scalar_type());
  for (std::size_t e : bucket.entries) {
    ParameterEntry& entry = store_.entries()[e];
    entry.gradient = bucket.gradient_buffer.view(entry.offset - bucket.begin, entry.shape);
  }
}

void ShardedOptimizer::unbind_gradients(Bucket& bucket) {
  for (std::size_t e : bucket.entries) store_.entries()[e].gradient = Tensor();
  bucket.gradient_buffer = Tensor();
}

void ShardedOptimizer::acquire_values(std::int64_t unit) {
  if (options_.zero_stage < 3) return;
  for (std::size_t b : units_[static_cast<std::size_t>(unit)].buckets) {
    Bucket& bucket = buckets_[b];
    if (bucket.value_references++ == 0) bind_values(bucket);
  }
}

void ShardedOptimizer::release_values(std::int64_t unit) {
  if (options_.zero_stage < 3) return;
  for (std::size_t b : units_[static_cast<std::size_t>(unit)].buckets) {
    Bucket& bucket = buckets_[b];
    STRATA_CHECK(bucket.value_references > 0, "unit {} released more often than acquired", unit);
    if (--bucket.value_references == 0) unbind_values(bucket);
  }
}

void ShardedOptimizer::acquire_gradients(std::int64_t unit) {
  UnitState& state = units_[static_cast<std::size_t>(unit)];
  for (std::size_t b : state.buckets) {
    Bucket& bucket = buckets_[b];
    if (options_.zero_stage >= 2 && bucket.gradient_buffer.numel() == 0) bind_gradients(bucket);
  }
  state.gradient_references += 1;
}

void ShardedOptimizer::release_gradients(std::int64_t unit) {
  UnitState& state = units_[static_cast<std::size_t>(unit)];
  STRATA_CHECK(state.gradient_references > 0, "unit {} gradients released more often than acquired",
               unit);
  if (--state.gradient_references > 0) return;
  for (std::size_t b : state.buckets) {
    Bucket& bucket = buckets_[b];
    bucket.backward_done[static_cast<std::size_t>(unit - bucket.first_unit)] = true;
    const bool all_done = std::all_of(bucket.backward_done.begin(), bucket.backward_done.end(),
                                      [](bool d) { return d; });
    if (all_done) bucket_finished(bucket);
  }
}

void ShardedOptimizer::bucket_finished(Bucket& bucket) {
  if (options_.zero_stage >= 2) {
    // ZeRO-2/3: the full gradients exist only while a backward holds them. The last holder let
    // go: reduce-scatter what the buffer collected, and start afresh.
    for (std::int64_t u = bucket.first_unit; u <= bucket.last_unit; ++u) {
      if (units_[static_cast<std::size_t>(u)].gradient_references > 0) return;
    }
    reduce(bucket);
    bucket.reduced = false;
    std::fill(bucket.backward_done.begin(), bucket.backward_done.end(), false);
  } else if (bucket.armed && !bucket.reduced) {
    // Stages 0 and 1 accumulate locally and reduce once: here, overlapping the rest of the
    // backward, once the runtime armed the bucket's stage.
    reduce(bucket);
  }
}

void ShardedOptimizer::arm_reductions(const std::vector<std::int64_t>& units) {
  if (options_.zero_stage >= 2 || !options_.overlap_grad_reduce) return;
  for (std::int64_t unit : units) {
    if (ties_embedding_ && unit == 0) continue;  // reduced after the tie
    for (std::size_t b : units_[static_cast<std::size_t>(unit)].buckets) {
      Bucket& bucket = buckets_[b];
      bucket.armed = true;
      std::fill(bucket.backward_done.begin(), bucket.backward_done.end(), false);
    }
  }
}

void ShardedOptimizer::reduce_units(const std::vector<std::int64_t>& units) {
  if (options_.zero_stage >= 2) return;
  // In the order the backward finished them: the head's end first.
  for (auto unit = units.rbegin(); unit != units.rend(); ++unit) {
    if (ties_embedding_ && *unit == 0) continue;
    const std::vector<std::size_t>& held = units_[static_cast<std::size_t>(*unit)].buckets;
    for (auto b = held.rbegin(); b != held.rend(); ++b) {
      if (!buckets_[*b].reduced) reduce(buckets_[*b]);
    }
  }
}

void ShardedOptimizer::tie_embedding_gradients(Communicator& embedding_group) {
  STRATA_CHECK(ties_embedding_, "TIED_GRAD on a rank without a tied word embedding");
  // What the two ends share: the word embedding (a tied head), or with MTP the whole embedding
  // unit (learned positions and an embedding norm too) — the same entries, in store order, on
  // both ends.
  for (ParameterEntry& entry : store_.entries()) {
    if (!entry.spec.name.starts_with("embedding.")) break;  // unit 0 leads the store
    if (!model_.config().mtp && entry.spec.name != "embedding.word") continue;
    Tensor gradient = flat(entry.gradient);
    embedding_group.all_reduce(gradient, ReduceOp::sum);
  }
  release_gradients(0);  // the hold of begin_step: ZeRO-2/3 reduce-scatter here
  for (std::size_t b : units_[0].buckets) {
    if (options_.zero_stage < 2 && !buckets_[b].reduced) reduce(buckets_[b]);
  }
}

void ShardedOptimizer::complete_tensor_parallel_sums(Bucket& bucket) {
  const TensorParallelism& tp = model_.tensor_parallel();
  // Routed experts kept apart are summed over the expert data-parallel group alone: it holds
  // every rank with the same experts, tp peers included.
  if (!tp.active() || bucket.experts) return;
  for (std::size_t e : bucket.entries) {
    ParameterEntry& entry = store_.entries()[e];
    Tensor gradient = flat(entry.gradient);
    if (entry.spec.tensor_parallel.kind != PlacementKind::shard) {
      // Replicated over tp: each rank saw only its tokens under sequence parallelism, or only
      // its heads (a query/key norm's gain).
      if (tp.shards_tokens() || entry.spec.partial_over_tensor_parallel) {
        tp.group->all_reduce(gradient, ReduceOp::sum);
      }
      continue;
    }
    for (const ElementRun& run : entry.runs) {
      if (run.replicas == 1) continue;
      // A block held by several tp ranks (a kv head): each computed it for its own query heads.
      Tensor part = gradient.view(run.local_offset, {run.length});
      tp.replicas(run.replicas).all_reduce(part, ReduceOp::sum);
    }
  }
}

void ShardedOptimizer::reduce(Bucket& bucket) {
  STRATA_CHECK(!bucket.reduced, "bucket of units {}..{} reduced twice", bucket.first_unit,
               bucket.last_unit);
  bucket.reduced = true;
  complete_tensor_parallel_sums(bucket);
  // ZeRO ≥ 1 reduce-scatters over the shard group; under hybrid sharding each reduced shard is
  // then summed over its replicas (HSDP's two-level reduction). Routed experts under expert
  // parallelism: over the expert data-parallel group and its ZeRO groups.
  Communicator& shards = shard_group(bucket);
  Communicator& replicas = replica_group(bucket);
  switch (options_.zero_stage) {
    case 0: {
      Communicator& group =
          bucket.experts ? groups_.expert_data_parallel() : groups_.gradient_reduction();
      Tensor gradients = bucket_gradients(bucket);
      in_flight_.push_back(group.all_reduce_async(gradients, ReduceOp::sum));
      break;
    }
    case 1: {
      Tensor shard = shard_of(gradient_shards_, bucket);
      if (bucket.padded == bucket.elements) {
        // The group divides the bucket: reduce-scatter straight from the gradient buffer.
        shards.reduce_scatter(bucket_gradients(bucket), shard);
      } else {
        Tensor padded = Tensor::zeros({bucket.padded}, store_.scalar_type());
        padded.view(0, {bucket.elements}).copy_from(bucket_gradients(bucket));
        shards.reduce_scatter(padded, shard);
      }
      if (replicas.size() > 1) replicas.all_reduce(shard, ReduceOp::sum);
      break;
    }
    default: {
      Tensor part = reduced_part_.view(0, {bucket.shard});
      shards.reduce_scatter(bucket.gradient_buffer, part);
      if (replicas.size() > 1) replicas.all_reduce(part, ReduceOp::sum);
      Tensor shard = shard_of(gradient_shards_, bucket);
      add_into(shard, part);
      unbind_gradients(bucket);
      break;
    }
  }
}

void ShardedOptimizer::add_to_parameter(ParameterEntry& entry, const std::vector<double>& delta) {
  STRATA_CHECK(static_cast<std::int64_t>(delta.size()) == shape_numel(entry.shape) &&
                   entry.value.scalar_type() == ScalarType::float32 &&
                   entry.value.device() == Device::cpu,
               "{}: a step of {} values for a float32 CPU parameter of {}", entry.spec.name,
               delta.size(), shape_numel(entry.shape));
  if (options_.zero_stage == 3 && !one_device_step_) {
    for (const Bucket& bucket : buckets_) {
      for_each_owned_slice(bucket, [&](const ParameterEntry& owned, const OwnedSlice& slice) {
        if (&owned != &entry) return;
        float* values = value_shards_.data<float>() + slice.shard_at;
        for (std::int64_t i = slice.first; i < slice.last; ++i) {
          values[i - slice.first] += static_cast<float>(delta[static_cast<std::size_t>(i)]);
        }
      });
    }
    return;
  }
  float* values = store_.values().data<float>() + entry.offset;
  for (std::size_t i = 0; i < delta.size(); ++i) values[i] += static_cast<float>(delta[i]);
}

void ShardedOptimizer::begin_step() {
  if (options_.zero_stage < 2) {
    store_.zero_gradients();
  }
  if (options_.zero_stage >= 1) gradient_shards_.fill_zero();
  for (Bucket& bucket : buckets_) {
    bucket.reduced = false;
    bucket.armed = false;
    std::fill(bucket.backward_done.begin(), bucket.backward_done.end(), false);
  }
  // The tied word embedding's gradients stay whole until the tie (tie_embedding_gradients).
  if (ties_embedding_) acquire_gradients(0);
}

void ShardedOptimizer::finish_gradients() {
  // Without overlap, stages 0 and 1 reduce now, in the order the backward would have.
  for (auto bucket = buckets_.rbegin(); bucket != buckets_.rend(); ++bucket) {
    if (options_.zero_stage >= 2) {
      STRATA_CHECK(bucket->gradient_buffer.numel() == 0,
                   "a ZeRO-{} bucket of units {}..{} left unreduced by the backward",
                   options_.zero_stage, bucket->first_unit, bucket->last_unit);
      continue;
    }
    if (!bucket->reduced) reduce(*bucket);
  }
  for (CommunicationRequest& request : in_flight_) request.wait();
  in_flight_.clear();
}

double ShardedOptimizer::owned_sum_of_squares() {
  double sum = 0;
  if (options_.zero_stage == 0) {
    // Gradients are the same on every rank that summed them: the first rank of the dp × cp
    // group counts the dense ones, the first of the expert data-parallel group the experts'.
    const bool counts_dense = shard_rank_ == 0;
    const bool counts_experts = groups_.expert_data_parallel().rank() == 0;
    for (const Bucket& bucket : buckets_) {
      if (!(bucket.experts ? counts_experts : counts_dense)) continue;
      for (const auto& [first, last] : bucket.owned) {
        sum += sum_of_squares(store_.gradients(), bucket.begin + first, last - first);
      }
    }
    return sum;
  }
  for (const Bucket& bucket : buckets_) {
    // A shard held by several replicas (hybrid sharding) is counted by the first.
    if (!(bucket.experts ? expert_first_replica_ : first_replica_)) continue;
    const std::int64_t low = shard_rank(bucket) * bucket.shard;
    const std::int64_t high = std::min(low + bucket.shard, bucket.elements);
    for (const auto& [first, last] : bucket.owned) {
      const std::int64_t begin = std::max(first, low);
      const std::int64_t end = std::min(last, high);
      if (begin < end) {
        sum += sum_of_squares(gradient_shards_, bucket.shard_offset + (begin - low), end - begin);
      }
    }
  }
  return sum;
}

double ShardedOptimizer::step(double learning_rate, std::int64_t step, const AdamWConfig& config,
                              double max_gradient_norm) {
  if (one_device_step_) {
    // Every gradient is here once and reduced (groups of one): the one-device driver, which
    // computes the norm and updates in one pass on a GPU.
    return optimizer_step(store_, moments_, learning_rate, step, config, max_gradient_norm);
  }
  const double norm =
      std::sqrt(all_reduce_value(groups_.world(), owned_sum_of_squares(), ReduceOp::sum));
  // Clipping's factor is applied as AdamW reads each gradient (no pass of its own).
  const double gradient_scale = clipping_scale(norm, max_gradient_norm);
  const auto decay_of = [&](const ParameterEntry& entry) {
    return entry.spec.weight_decay ? config.weight_decay : 0.0;
  };
  if (options_.zero_stage == 0) {
    apply_adamw(store_, moments_, learning_rate, step, config, gradient_scale);
    return norm;
  }
  for (Bucket& bucket : buckets_) {
    Communicator& shards = shard_group(bucket);
    const std::int64_t low = shard_rank(bucket) * bucket.shard;
    const std::int64_t high = std::min(low + bucket.shard, bucket.elements);
    for_each_owned_slice(bucket, [&](const ParameterEntry& entry, const OwnedSlice& slice) {
      const Shape shape{slice.last - slice.first};
      Tensor value = options_.zero_stage == 3
                         ? value_shards_.view(slice.shard_at, shape)
                         : store_.values().view(entry.offset + slice.first, shape);
      Tensor gradient = gradient_shards_.view(slice.shard_at, shape);
      Tensor first_moment = moments_.first.view(slice.shard_at, shape);
      Tensor second_moment = moments_.second.view(slice.shard_at, shape);
      adamw_update(value, gradient, first_moment, second_moment, learning_rate, decay_of(entry),
                   step + 1, config, gradient_scale);
    });
    if (options_.zero_stage == 3) continue;
    // Stages 1 and 2: every dp rank gets every share of the updated values back — in place in
    // the values buffer when dp divides the bucket, through a padded copy when it does not.
    if (bucket.padded == bucket.elements) {
      Tensor whole = store_.values().view(bucket.begin, {bucket.elements});
      const Tensor own = store_.values().view(bucket.begin + low, {bucket.shard});
      shards.all_gather(own, whole);
      continue;
    }
    Tensor share = Tensor::zeros({bucket.shard}, store_.scalar_type());
    if (high > low) {
      share.view(0, {high - low}).copy_from(store_.values().view(bucket.begin + low, {high - low}));
    }
    Tensor padded = Tensor::zeros({bucket.padded}, store_.scalar_type());
    shards.all_gather(share, padded);
    store_.values()
        .view(bucket.begin, {bucket.elements})
        .copy_from(padded.view(0, {bucket.elements}));
  }
  return norm;
}

void ShardedOptimizer::gather_values(ParameterStore& whole) {
  const TensorParallelism& tp = model_.tensor_parallel();
  std::vector<ParameterEntry>& entries = store_.entries();
  // Each pipeline rank fills what its stages hold, zeros elsewhere: a sum over pp assembles it.
  const bool pipelined = groups_.mesh().pp > 1;
  if (pipelined) whole.values().fill_zero();
  for (Bucket& bucket : buckets_) {
    for (std::int64_t unit = bucket.first_unit; unit <= bucket.last_unit; ++unit) {
      acquire_values(unit);
    }
    for (std::size_t e : bucket.entries) {
      const ParameterEntry& entry = entries[e];
      ParameterEntry& target = whole.entry(entry.spec.name);
      if (!counts_word_embedding_ && entry.spec.name.starts_with("embedding.")) continue;
      // Each element from the one tp rank that owns it, zeros elsewhere: the sum is exact.
      // Routed experts split over ep × etp: each rank fills its own part (the first etp rank
      // what etp does not split) and the sum over ep × etp holds them all (those groups may be
      // made of tp peers, so tp takes no part).
      const bool routed_apart =
          experts_apart_ && entry.spec.expert_parallel.kind == PlacementKind::shard;
      Tensor assembled = Tensor::zeros({shape_numel(entry.spec.shape)}, store_.scalar_type());
      const bool sharded = entry.spec.tensor_parallel.kind == PlacementKind::shard;
      const bool counted_here =
          routed_apart ? (entry.spec.expert_tensor_parallel.kind == PlacementKind::shard ||
                          groups_.expert_tensor_parallel().rank() == 0)
                       : tp.rank() == 0;
      const Tensor local = entry.value.reshaped({shape_numel(entry.shape)});
      for (const ElementRun& run : entry.runs) {
        const bool owned = sharded ? run.replica_index == 0 : counted_here;
        if (!owned) continue;
        assembled.view(run.global_offset, {run.length})
            .copy_from(local.view(run.local_offset, {run.length}));
      }
      if (routed_apart) {
        groups_.expert_model_parallel().all_reduce(assembled, ReduceOp::sum);
      } else if (tp.active()) {
        tp.group->all_reduce(assembled, ReduceOp::sum);
      }
      target.value.copy_from(assembled);
    }
    for (std::int64_t unit = bucket.last_unit; unit >= bucket.first_unit; --unit) {
      release_values(unit);
    }
  }
  if (pipelined) groups_.pipeline_parallel().all_reduce(whole.values(), ReduceOp::sum);
  whole.refresh_compute_values();
}

void ShardedOptimizer::scatter_values(const ParameterStore& whole) {
  const auto source_of = [&](const ParameterEntry& entry) {
    return whole.entry(entry.spec.name).value.reshaped({shape_numel(entry.spec.shape)});
  };
  if (options_.zero_stage < 3) {
    Tensor destination = store_.values();
    for (const ParameterEntry& entry : store_.entries()) {
      copy_slice_from_whole(destination, entry.offset, entry, 0, shape_numel(entry.shape),
                            source_of(entry));
    }
  }
  for (const Bucket& bucket : buckets_) {
    if (options_.zero_stage < 3) break;
    for_each_owned_slice(bucket, [&](const ParameterEntry& entry, const OwnedSlice& slice) {
      copy_slice_from_whole(value_shards_, slice.shard_at, entry, slice.first, slice.last,
                            source_of(entry));
    });
  }
  // A 16-bit working copy follows the values it was made from.
  if (options_.zero_stage < 3) store_.refresh_compute_values();
}

std::vector<Tensor> ShardedOptimizer::values_state() {
  return {options_.zero_stage == 3 ? value_shards_ : store_.values()};
}

void ShardedOptimizer::values_written() {
  if (options_.zero_stage < 3) store_.refresh_compute_values();
}

std::vector<Tensor> ShardedOptimizer::moments_state() { return {moments_.first, moments_.second}; }

void ShardedOptimizer::release_moments(std::size_t half) {
  (half == 0 ? moments_.first : moments_.second) = Tensor();
}

void ShardedOptimizer::release_gradients() {
  for (CommunicationRequest& request : in_flight_) request.wait();
  in_flight_.clear();
  store_.release_gradients();
  gradient_shards_ = Tensor();
  reduced_part_ = Tensor();
  for (Bucket& bucket : buckets_) bucket.gradient_buffer = Tensor();
}

}  // namespace strata::executor
