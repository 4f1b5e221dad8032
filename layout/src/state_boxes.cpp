#include "strata/layout/state_boxes.h"

#include <algorithm>
#include <array>
#include <memory>

#include "layout_check.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::layout {
namespace {

// The innermost dimension any axis may split `spec` along (0 when none does).
std::size_t innermost_split_dimension(const ParameterSpec& spec) {
  std::size_t innermost = 0;
  const auto consider = [&](const Placement& placement) {
    if (placement.kind == PlacementKind::shard) {
      innermost = std::max(innermost, static_cast<std::size_t>(placement.dim));
    }
  };
  consider(spec.tensor_parallel);
  if (spec.routed_expert()) {
    consider(spec.expert_parallel);
    consider(spec.expert_tensor_parallel);
  }
  return innermost;
}

// An interval of a view's rows or columns held by a rank: `length` from `global` in the view,
// from `local` in the rank's local rows (or within its local row).
struct HeldInterval {
  std::int64_t global = 0, local = 0, length = 0;
};

// The rows and columns of its view a rank holds of one parameter: its local tensor is the held
// rows, each the held column intervals side by side (`width` elements), row-major.
struct LocalGrid {
  std::vector<HeldInterval> rows, cols;
  std::int64_t width = 0;
};

LocalGrid local_grid(const ParameterSpec& spec, const RankCoordinates& rank) {
  const std::vector<AxisSplit> splits = rank_splits(spec, rank);
  const std::vector<std::vector<DimensionInterval>> held = held_intervals(spec.shape, splits);
  const std::size_t split = innermost_split_dimension(spec);
  LocalGrid grid;
  std::int64_t inner = 1;
  for (std::size_t d = split + 1; d < spec.shape.size(); ++d) inner *= spec.shape[d];
  for (const DimensionInterval& interval : held[split]) {
    grid.cols.push_back({interval.global_start * inner, grid.width, interval.length * inner});
    grid.width += interval.length * inner;
  }
  // Rows: the held indices of the dimensions before `split`, row-major; `whole_below[d]` is the
  // rows of dimensions d… when each of them is held whole (−1 otherwise), so that an unsplit tail
  // is one interval rather than a row at a time.
  std::vector<std::int64_t> whole_below(split + 1, 1);
  for (std::size_t d = split; d-- > 0;) {
    const bool whole = held[d].size() == 1 && held[d][0].length == spec.shape[d];
    whole_below[d] = whole && whole_below[d + 1] >= 0 ? whole_below[d + 1] * spec.shape[d] : -1;
  }
  std::int64_t local_rows = 0;
  const auto add_rows = [&](std::int64_t global, std::int64_t length) {
    if (!grid.rows.empty() && grid.rows.back().global + grid.rows.back().length == global) {
      grid.rows.back().length += length;
    } else {
      grid.rows.push_back({global, local_rows, length});
    }
    local_rows += length;
  };
  const auto walk = [&](auto&& self, std::size_t d, std::int64_t prefix) -> void {
    if (whole_below[d] >= 0) {
      add_rows(prefix * whole_below[d], whole_below[d]);
      return;
    }
    for (const DimensionInterval& interval : held[d]) {
      for (std::int64_t i = 0; i < interval.length; ++i) {
        self(self, d + 1, prefix * spec.shape[d] + interval.global_start + i);
      }
    }
  };
  walk(walk, 0, 0);
  return grid;
}

// Appends the boxes of local elements [first, last) of a parameter whose local element 0 sits at
// state offset `origin`.
void add_local_range(const LocalGrid& grid, std::size_t parameter, std::int64_t first,
                     std::int64_t last, std::int64_t origin, std::vector<StateBox>& boxes) {
  if (first >= last) return;
  const std::int64_t width = grid.width;
  // Local rows [row_begin, row_end), positions [position_begin, position_end) within each.
  const auto rectangle = [&](std::int64_t row_begin, std::int64_t row_end,
                             std::int64_t position_begin, std::int64_t position_end) {
    if (row_begin >= row_end || position_begin >= position_end) return;
    for (const HeldInterval& rows : grid.rows) {
      const std::int64_t low = std::max(row_begin, rows.local);
      const std::int64_t high = std::min(row_end, rows.local + rows.length);
      if (low >= high) continue;
      for (const HeldInterval& cols : grid.cols) {
        const std::int64_t left = std::max(position_begin, cols.local);
        const std::int64_t right = std::min(position_end, cols.local + cols.length);
        if (left >= right) continue;
        boxes.push_back({parameter, rows.global + (low - rows.local),
                         cols.global + (left - cols.local), high - low, right - left,
                         origin + low * width + left, width});
      }
    }
  };
  const std::int64_t first_row = first / width;
  const std::int64_t last_row = (last - 1) / width;
  if (first_row == last_row) {
    rectangle(first_row, first_row + 1, first % width, (last - 1) % width + 1);
    return;
  }
  std::int64_t whole_rows_begin = first_row;
  if (first % width != 0) {
    rectangle(first_row, first_row + 1, first % width, width);
    ++whole_rows_begin;
  }
  rectangle(whole_rows_begin, last / width, 0, width);
  rectangle(last / width, last / width + 1, 0, last % width);
}

}  // namespace

ParameterView parameter_view(const ParameterSpec& spec) {
  const std::size_t split = innermost_split_dimension(spec);
  ParameterView view;
  for (std::size_t d = 0; d < spec.shape.size(); ++d) {
    (d < split ? view.rows : view.cols) *= spec.shape[d];
  }
  return view;
}

ModelStateBoxes::ModelStateBoxes(const schemas::ModelConfig& model)
    : model_(model), parameters_(transformer_parameters(model)) {
  views_.reserve(parameters_.size());
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    views_.push_back(parameter_view(parameters_[i]));
    index_of_.emplace(parameters_[i].name, i);
  }
}

// What a rank holds by its place on the axes that split parameters (pipeline, tp, ep, etp): its
// parameters, their grids and its buckets — shared by the ranks that differ only in their ZeRO
// shard or replica.
struct RankHoldings {
  std::vector<HeldParameter> held;
  std::vector<LocalGrid> grids;
  std::vector<std::size_t> global_index;
  std::vector<GradientBucket> buckets;
  std::int64_t total = 0;

  // The rank's flat elements [first, last) (its parameters one after another) placed from state
  // offset `offset` on.
  void add_flat_range(std::int64_t first, std::int64_t last, std::int64_t offset,
                      std::vector<StateBox>& boxes) const {
    auto p = static_cast<std::size_t>(std::partition_point(held.begin(), held.end(),
                                                           [first](const HeldParameter& h) {
                                                             return h.offset + h.elements <= first;
                                                           }) -
                                      held.begin());
    for (; p < held.size() && held[p].offset < last; ++p) {
      const std::int64_t begin = std::max(first, held[p].offset);
      const std::int64_t end = std::min(last, held[p].offset + held[p].elements);
      add_local_range(grids[p], global_index[p], begin - held[p].offset, end - held[p].offset,
                      offset - first + held[p].offset, boxes);
    }
  }
};

LayoutStateBoxes::LayoutStateBoxes(const ModelStateBoxes& model,
                                   const std::optional<StateLayout>& layout)
    : model_(model), layout_(layout.value_or(StateLayout{})) {}

LayoutStateBoxes::~LayoutStateBoxes() = default;

const RankHoldings& LayoutStateBoxes::holdings(std::int64_t pp_rank,
                                               const RankCoordinates& coordinates) const {
  const std::array<std::int64_t, 4> key{pp_rank, coordinates.tp_rank, coordinates.ep_rank,
                                        coordinates.etp_rank};
  std::unique_ptr<const RankHoldings>& cached = holdings_[key];
  if (cached) return *cached;
  const schemas::ModelConfig& model = model_.model();
  const std::vector<schemas::PipelineStage> stages = rank_stages(layout_, model, pp_rank);
  const std::vector<ParameterSpec> specs = stage_parameters(model, stages);
  auto made = std::make_unique<RankHoldings>();
  made->held = held_parameters(model, specs, coordinates);
  const bool holds_word_embedding =
      std::any_of(specs.begin(), specs.end(),
                  [](const ParameterSpec& spec) { return spec.name == "embedding.word"; });
  made->buckets = gradient_buckets(made->held, rank_unit_stages(model, stages),
                                   bucket_rule(layout_.mesh, model, layout_.zero_stage,
                                               layout_.bucket_elements, holds_word_embedding));
  made->grids.reserve(specs.size());
  for (const ParameterSpec& spec : specs) {
    made->grids.push_back(local_grid(spec, coordinates));
    made->global_index.push_back(model_.index_of(spec.name));
  }
  made->total = made->held.empty() ? 0 : made->held.back().offset + made->held.back().elements;
  cached = std::move(made);
  return *cached;
}

RankStateBoxes LayoutStateBoxes::of_rank(std::int64_t rank) const {
  const schemas::Mesh& mesh = layout_.mesh;
  STRATA_LAYOUT_CHECK(rank >= 0 && rank < mesh.world_size(), "rank {} of a layout of {} ranks",
                      rank, mesh.world_size());
  const schemas::MeshCoordinates at = schemas::mesh_coordinates(mesh, rank);
  const schemas::ExpertCoordinates expert = schemas::expert_coordinates(mesh, rank);
  const RankHoldings& holds =
      holdings(at[static_cast<std::size_t>(schemas::MeshAxis::pp)],
               {.tp_rank = at[static_cast<std::size_t>(schemas::MeshAxis::tp)],
                .tp = mesh.tp,
                .ep_rank = expert[static_cast<std::size_t>(schemas::ExpertAxis::ep)],
                .ep = mesh.ep,
                .etp_rank = expert[static_cast<std::size_t>(schemas::ExpertAxis::etp)],
                .etp = mesh.etp});
  const std::int64_t shard_rank = schemas::zero_shard_rank(mesh, rank);
  const std::int64_t expert_shard_rank = schemas::expert_zero_shard_rank(mesh, rank);
  // A ZeRO shard: this rank's share of each bucket, one after another.
  const auto add_shards = [&](std::vector<StateBox>& boxes) {
    std::int64_t elements = 0;
    for (const GradientBucket& bucket : holds.buckets) {
      const std::int64_t low = (bucket.experts ? expert_shard_rank : shard_rank) * bucket.shard;
      const std::int64_t high = std::min(low + bucket.shard, bucket.elements);
      if (high > low) {
        holds.add_flat_range(bucket.begin + low, bucket.begin + high, bucket.shard_offset, boxes);
      }
      elements += bucket.shard;
    }
    return elements;
  };
  RankStateBoxes state;
  if (layout_.zero_stage >= 3) {
    state.values_elements = add_shards(state.values);
  } else {
    state.values_elements = holds.total;
    holds.add_flat_range(0, holds.total, 0, state.values);
  }
  if (layout_.zero_stage >= 1) {
    state.moments_elements = add_shards(state.moments);
  } else {
    state.moments_elements = holds.total;
    holds.add_flat_range(0, holds.total, 0, state.moments);
  }
  return state;
}

RankStateBoxes ModelStateBoxes::of_rank(const std::optional<StateLayout>& layout,
                                        std::int64_t rank) const {
  return LayoutStateBoxes(*this, layout).of_rank(rank);
}

std::size_t ModelStateBoxes::index_of(const std::string& name) const {
  const auto found = index_of_.find(name);
  STRATA_LAYOUT_CHECK(found != index_of_.end(), "no parameter {} in the model", name);
  return found->second;
}

}  // namespace strata::layout
