#include "strata/layout/gradient_buckets.h"

#include <algorithm>

#include "layout_check.h"

namespace strata::layout {

std::int64_t default_gradient_bucket_elements(std::int64_t data_parallel_shards) {
  return std::max<std::int64_t>(40'000'000, 1'000'000 * data_parallel_shards);
}

std::int64_t gradient_bucket_elements(const schemas::Plan& plan) {
  return plan.gradient_bucket_elements.value_or(
      default_gradient_bucket_elements(plan.mesh.dp * plan.mesh.cp));
}

std::vector<UnitBucket> group_units_into_buckets(std::span<const std::int64_t> unit_elements,
                                                 std::int64_t bucket_elements,
                                                 bool bucket_per_unit) {
  std::vector<UnitBucket> backward_order;
  std::int64_t collected = 0;
  std::size_t last_unit = unit_elements.size();  // of the bucket being collected; size(): none
  for (std::size_t unit = unit_elements.size(); unit-- > 0;) {
    if (last_unit == unit_elements.size()) last_unit = unit;
    collected += unit_elements[unit];
    if (bucket_per_unit || collected >= bucket_elements || unit == 0) {
      backward_order.push_back({unit, last_unit});
      last_unit = unit_elements.size();
      collected = 0;
    }
  }
  return {backward_order.rbegin(), backward_order.rend()};
}

bool experts_reduced_apart(const schemas::Mesh& mesh) { return mesh.ep * mesh.etp > 1; }

std::vector<AxisSplit> rank_splits(const ParameterSpec& spec, const RankCoordinates& rank) {
  if (spec.routed_expert()) {
    STRATA_LAYOUT_CHECK(spec.tensor_parallel.kind == PlacementKind::replicate,
                        "{}: split by both tensor and expert parallelism", spec.name);
    return {{&spec.expert_parallel, rank.ep_rank, rank.ep},
            {&spec.expert_tensor_parallel, rank.etp_rank, rank.etp}};
  }
  return {{&spec.tensor_parallel, rank.tp_rank, rank.tp}};
}

std::vector<HeldParameter> held_parameters(const schemas::ModelConfig& model,
                                           std::span<const ParameterSpec> specs,
                                           const RankCoordinates& rank) {
  std::vector<HeldParameter> held;
  held.reserve(specs.size());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::int64_t elements = 1;
    for (const std::int64_t extent : local_shape(specs[i].shape, rank_splits(specs[i], rank))) {
      elements *= extent;
    }
    held.push_back(
        {i, parameter_unit(model, specs[i].name), offset, elements, specs[i].routed_expert()});
    offset += elements;
  }
  return held;
}

std::vector<int> rank_unit_stages(const schemas::ModelConfig& model,
                                  std::span<const schemas::PipelineStage> stages) {
  std::vector<int> unit_stage(static_cast<std::size_t>(parameter_unit_count(model)), -1);
  for (std::size_t chunk = 0; chunk < stages.size(); ++chunk) {
    for (const std::int64_t unit : stage_units(model, stages[chunk])) {
      int& owner = unit_stage[static_cast<std::size_t>(unit)];
      if (owner < 0) owner = static_cast<int>(chunk);
    }
  }
  return unit_stage;
}

BucketRule bucket_rule(const schemas::Mesh& mesh, const schemas::ModelConfig& model,
                       std::int64_t zero_stage, std::int64_t bucket_elements,
                       bool holds_word_embedding) {
  return {.zero_stage = zero_stage,
          .bucket_elements = bucket_elements,
          .dp = mesh.zero_shard_dp() * mesh.cp,
          .expert_dp = experts_reduced_apart(mesh) ? mesh.expert_zero_shards() : 0,
          .tied_word_embedding_bucket =
              mesh.pp > 1 && model.last_stage_uses_word_embedding() && holds_word_embedding};
}

namespace {

// [begin, end) of each unit in the flat layout; begin −1 where the rank holds none of it.
struct UnitExtent {
  std::int64_t begin = -1, end = -1;
};

std::vector<UnitExtent> unit_extents(std::span<const HeldParameter> held, std::size_t units) {
  std::vector<UnitExtent> extents(units);
  for (const HeldParameter& parameter : held) {
    UnitExtent& extent = extents.at(static_cast<std::size_t>(parameter.unit));
    if (extent.begin < 0) extent.begin = parameter.offset;
    STRATA_LAYOUT_CHECK(extent.end < 0 || extent.end == parameter.offset,
                        "unit {} is not contiguous in the flat layout", parameter.unit);
    extent.end = parameter.offset + parameter.elements;
  }
  return extents;
}

// The buckets of the grouping rule by units: runs of units that may share a bucket — held, on
// one stage, each starting where the one before ends, and not across a tied word embedding kept
// in a bucket of its own — grouped by group_units_into_buckets.
std::vector<GradientBucket> unit_buckets(std::span<const UnitExtent> extents,
                                         std::span<const int> unit_stage, const BucketRule& rule) {
  const std::size_t unit_count = extents.size();
  std::vector<GradientBucket> buckets;
  for (std::size_t first = 0; first < unit_count;) {
    if (extents[first].begin < 0) {
      ++first;
      continue;
    }
    std::size_t end = first + 1;
    while (end < unit_count && extents[end].begin >= 0 && unit_stage[end] == unit_stage[end - 1] &&
           extents[end].begin == extents[end - 1].end &&
           !(rule.tied_word_embedding_bucket && end == 1)) {
      ++end;
    }
    std::vector<std::int64_t> unit_elements;
    for (std::size_t unit = first; unit < end; ++unit) {
      unit_elements.push_back(extents[unit].end - extents[unit].begin);
    }
    for (const UnitBucket& grouped :
         group_units_into_buckets(unit_elements, rule.bucket_elements, rule.zero_stage == 3)) {
      GradientBucket bucket;
      bucket.first_unit = static_cast<std::int64_t>(first + grouped.first_unit);
      bucket.last_unit = static_cast<std::int64_t>(first + grouped.last_unit);
      bucket.begin = extents[first + grouped.first_unit].begin;
      bucket.elements = extents[first + grouped.last_unit].end - bucket.begin;
      buckets.push_back(bucket);
    }
    first = end;
  }
  return buckets;
}

}  // namespace

std::vector<GradientBucket> gradient_buckets(std::span<const HeldParameter> held,
                                             std::span<const int> unit_stage,
                                             const BucketRule& rule) {
  const std::vector<UnitExtent> extents = unit_extents(held, unit_stage.size());
  // With experts apart, each bucket is cut at every boundary between routed experts and the rest.
  std::vector<GradientBucket> pieces;
  for (const GradientBucket& grouped : unit_buckets(extents, unit_stage, rule)) {
    const std::int64_t end = grouped.begin + grouped.elements;
    GradientBucket piece;
    piece.begin = grouped.begin;
    for (const HeldParameter& parameter : held) {
      if (parameter.offset < grouped.begin || parameter.offset >= end || rule.expert_dp == 0) {
        continue;
      }
      if (parameter.offset > piece.begin && parameter.routed_expert != piece.experts) {
        piece.elements = parameter.offset - piece.begin;
        pieces.push_back(piece);
        piece.begin = parameter.offset;
      }
      if (parameter.offset == piece.begin) piece.experts = parameter.routed_expert;
    }
    piece.elements = end - piece.begin;
    pieces.push_back(piece);
  }
  // Units and shares of each piece.
  std::int64_t shard_offset = 0;
  for (GradientBucket& bucket : pieces) {
    const std::int64_t sharing = bucket.experts ? rule.expert_dp : rule.dp;
    bucket.shard = (bucket.elements + sharing - 1) / sharing;
    bucket.padded = bucket.shard * sharing;
    bucket.shard_offset = shard_offset;
    shard_offset += bucket.shard;
    bucket.first_unit = static_cast<std::int64_t>(unit_stage.size());
    bucket.last_unit = -1;
    for (const HeldParameter& parameter : held) {
      if (parameter.offset < bucket.begin || parameter.offset >= bucket.begin + bucket.elements) {
        continue;
      }
      bucket.first_unit = std::min(bucket.first_unit, parameter.unit);
      bucket.last_unit = std::max(bucket.last_unit, parameter.unit);
    }
  }
  return pieces;
}

std::vector<GradientBucket> stage_gradient_buckets(const schemas::Plan& plan,
                                                   const schemas::PipelineStage& stage) {
  const schemas::ModelConfig& model = plan.model;
  const std::vector<ParameterSpec> specs = stage_parameters(model, {stage});
  const RankCoordinates first_rank{.tp = plan.mesh.tp, .ep = plan.mesh.ep, .etp = plan.mesh.etp};
  const std::vector<HeldParameter> held = held_parameters(model, specs, first_rank);
  const std::vector<int> unit_stage = rank_unit_stages(model, {&stage, 1});
  const bool holds_word_embedding =
      stage.embedding || (stage.lm_head && model.last_stage_uses_word_embedding());
  return gradient_buckets(held, unit_stage,
                          bucket_rule(plan.mesh, model, plan.zero_stage,
                                      gradient_bucket_elements(plan), holds_word_embedding));
}

}  // namespace strata::layout
