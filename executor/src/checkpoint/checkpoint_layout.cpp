#include "strata/executor/checkpoint/checkpoint_layout.h"

#include <algorithm>

#include "strata/executor/checkpoint/sharded_checkpoint.h"
#include "strata/executor/model/parameter_units.h"
#include "strata/executor/model/transformer.h"
#include "strata/executor/zero/bucket_layout.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/layout/state_layout.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::executor {

namespace {

// The segments of the store's elements [first, last) (flat store offsets) placed from
// `file_offset` on.
void add_store_range(const ParameterStore& store, const std::vector<std::size_t>& parameter_index,
                     std::int64_t first, std::int64_t last, std::int64_t file_offset,
                     std::vector<FileSegment>& segments) {
  // Entries lie in the flat buffer in order: start at the last one beginning at or before
  // `first`, stop at the first beginning at or after `last` (a ZeRO shard spans a few entries of
  // many, and each rank's layout asks for every shard of it).
  const std::vector<ParameterEntry>& entries = store.entries();
  const auto after =
      std::partition_point(entries.begin(), entries.end(),
                           [first](const ParameterEntry& entry) { return entry.offset <= first; });
  const std::size_t start =
      after == entries.begin() ? 0 : static_cast<std::size_t>(after - entries.begin()) - 1;
  for (std::size_t e = start; e < entries.size() && entries[e].offset < last; ++e) {
    const ParameterEntry& entry = entries[e];
    for (const ElementRun& run : entry.runs) {
      const std::int64_t begin = std::max(first, entry.offset + run.local_offset);
      const std::int64_t end = std::min(last, entry.offset + run.local_offset + run.length);
      if (begin >= end) continue;
      segments.push_back({parameter_index[e],
                          run.global_offset + (begin - entry.offset - run.local_offset),
                          file_offset + (begin - first), end - begin});
    }
  }
}

}  // namespace

std::vector<std::int64_t> checkpoint_writer_ranks(const layout::StateLayout& state_layout) {
  const schemas::Mesh& mesh = state_layout.mesh;
  if (mesh.ep * mesh.etp > 1) {
    // Expert parallelism: the ranks that write a file of their own (sharded_checkpoint_files) —
    // the first rank of each group holding the same experts for whole state, every first
    // replica of the shards from ZeRO-1 on.
    std::vector<std::int64_t> ranks;
    for (std::int64_t rank = 0; rank < mesh.world_size(); ++rank) {
      const ShardedCheckpointPart part =
          sharded_checkpoint_files(mesh, state_layout.zero_stage, rank);
      if (part.writes_values || part.writes_moments) ranks.push_back(rank);
    }
    return ranks;
  }
  // Every rank of the first shard group writes its shard from ZeRO-1 on; below, its first rank.
  const bool sharded = state_layout.zero_stage >= 1;
  const std::int64_t dp_writers = sharded ? mesh.zero_shard_dp() : 1;
  const std::int64_t cp_writers = sharded ? mesh.cp : 1;
  std::vector<std::int64_t> ranks;
  for (std::int64_t pp = 0; pp < mesh.pp; ++pp) {
    for (std::int64_t dp = 0; dp < dp_writers; ++dp) {
      for (std::int64_t cp = 0; cp < cp_writers; ++cp) {
        for (std::int64_t tp = 0; tp < mesh.tp; ++tp) {
          schemas::MeshCoordinates at{};
          at[static_cast<std::size_t>(schemas::MeshAxis::tp)] = tp;
          at[static_cast<std::size_t>(schemas::MeshAxis::cp)] = cp;
          at[static_cast<std::size_t>(schemas::MeshAxis::dp)] = dp;
          at[static_cast<std::size_t>(schemas::MeshAxis::pp)] = pp;
          ranks.push_back(schemas::mesh_rank(mesh, at));
        }
      }
    }
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

RankCheckpointLayout rank_checkpoint_layout(const schemas::ModelConfig& model,
                                            const layout::StateLayout& state_layout,
                                            std::int64_t rank) {
  const schemas::Mesh& mesh = state_layout.mesh;
  const std::int64_t zero_stage = state_layout.zero_stage;
  const std::int64_t bucket_elements = state_layout.bucket_elements;
  const schemas::MeshCoordinates at = schemas::mesh_coordinates(mesh, rank);
  const std::int64_t tp_rank = at[static_cast<std::size_t>(schemas::MeshAxis::tp)];
  const std::int64_t pp_rank = at[static_cast<std::size_t>(schemas::MeshAxis::pp)];
  const schemas::ExpertCoordinates expert = schemas::expert_coordinates(mesh, rank);
  const std::int64_t ep_rank = expert[static_cast<std::size_t>(schemas::ExpertAxis::ep)];
  const std::int64_t etp_rank = expert[static_cast<std::size_t>(schemas::ExpertAxis::etp)];
  // Its ZeRO shards: its place in its shard group (and in its expert shard group, for the routed
  // experts' buckets under expert parallelism), as the sharded optimizer's.
  const std::int64_t dp_rank = schemas::zero_shard_rank(mesh, rank);
  const std::int64_t expert_dp_rank = schemas::expert_zero_shard_rank(mesh, rank);
  // This pipeline rank's stages (all of the model without a pipeline).
  const std::vector<schemas::PipelineStage> stages =
      layout::rank_stages(state_layout, model, pp_rank);
  const ParameterStore store(
      stage_parameters(model, stages), ScalarType::float32, Device::cpu, std::nullopt,
      StoreOptions{tp_rank, mesh.tp, /*own_values=*/false,
                   /*own_gradients=*/false, ep_rank, mesh.ep, etp_rank, mesh.etp});
  std::vector<std::size_t> parameter_index;
  const std::vector<ParameterSpec> whole = transformer_parameters(model);
  for (const ParameterEntry& entry : store.entries()) {
    const auto found = std::find_if(whole.begin(), whole.end(), [&](const ParameterSpec& spec) {
      return spec.name == entry.spec.name;
    });
    parameter_index.push_back(static_cast<std::size_t>(found - whole.begin()));
  }
  // The buckets, as the sharded optimizer makes them.
  const std::vector<BucketRange> buckets =
      rank_bucket_layout(model, store, stages, mesh, zero_stage, bucket_elements);
  const ShardedCheckpointPart names = sharded_checkpoint_files(mesh, zero_stage, rank);
  RankCheckpointLayout layout;
  layout.values_file = names.values_file;
  layout.moments_file = names.moments_file;
  layout.writes_values = names.writes_values;
  layout.writes_moments = names.writes_moments;
  // A ZeRO shard file: this dp rank's share of each bucket, one after another (padding: none).
  const auto add_shards = [&](std::vector<FileSegment>& segments) {
    std::int64_t elements = 0;
    for (const BucketRange& bucket : buckets) {
      const std::int64_t low = (bucket.experts ? expert_dp_rank : dp_rank) * bucket.shard;
      const std::int64_t high = std::min(low + bucket.shard, bucket.elements);
      if (high > low) {
        add_store_range(store, parameter_index, bucket.begin + low, bucket.begin + high,
                        bucket.shard_offset, segments);
      }
      elements += bucket.shard;
    }
    return elements;
  };
  if (zero_stage >= 3) {
    layout.values_elements = add_shards(layout.values);
  } else {
    layout.values_elements = store.total_elements();
    add_store_range(store, parameter_index, 0, store.total_elements(), 0, layout.values);
  }
  if (zero_stage >= 1) {
    layout.moments_elements = add_shards(layout.moments);
  } else {
    layout.moments_elements = store.total_elements();
    add_store_range(store, parameter_index, 0, store.total_elements(), 0, layout.moments);
  }
  return layout;
}

RankCheckpointLayout rank_state_layout(const schemas::ModelConfig& model,
                                       const std::optional<layout::StateLayout>& state_layout,
                                       std::int64_t rank) {
  if (state_layout) return rank_checkpoint_layout(model, *state_layout, rank);
  // One device's state seen as a parallel layout of one rank, its files renamed.
  RankCheckpointLayout files = rank_checkpoint_layout(model, layout::StateLayout{}, 0);
  files.values_file = "model.bin";
  files.moments_file = "optimizer.bin";
  return files;
}

}  // namespace strata::executor
