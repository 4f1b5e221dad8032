// Where a rank's model state sits, in boxes: each of its state tensors (the values, and each half
// of the AdamW moments) as boxes of the model's parameters, computed from the parameter table and
// the state layout alone — without building the rank's model. A parameter is seen as a matrix
// (its view, a reshape of its row-major elements) whose rows no axis splits across a row: a
// tensor-parallel slice is then one box per segment (the fused qkv: three), and a ZeRO shard's
// flat range of it at most three boxes per segment (a partial row, whole rows, a partial row) —
// a handful where a list of element runs needs a run per row of every row-split weight.
//
// The layout transfer (transfer_plan.h) intersects these boxes to move or price a switch; a
// checkpoint's files hold the same elements in the same order (checkpoint_layout.h, which lists
// them as runs).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "strata/layout/gradient_buckets.h"
#include "strata/layout/parameter_table.h"
#include "strata/layout/state_layout.h"

namespace strata::layout {

// A parameter as a matrix: `cols` elements a row — those of its innermost dimension that any
// axis may split, and of every dimension after it — and `rows` of them. One view per parameter,
// whatever the mesh, so that the boxes of two layouts intersect.
struct ParameterView {
  std::int64_t rows = 1, cols = 1;
};
ParameterView parameter_view(const ParameterSpec& spec);

// Rows [row, row + rows) × columns [col, col + cols) of a parameter's view, held in a state
// tensor: element (r, c) sits at offset + (r − row) · pitch + (c − col).
struct StateBox {
  std::size_t parameter = 0;  // index into transformer_parameters(model)
  std::int64_t row = 0, col = 0, rows = 0, cols = 0;
  std::int64_t offset = 0, pitch = 0;
  std::int64_t elements() const { return rows * cols; }
};

struct RankStateBoxes {
  std::int64_t values_elements = 0;   // the values tensor's length (ZeRO padding included)
  std::int64_t moments_elements = 0;  // one half of the moments (first, then second moments)
  std::vector<StateBox> values;
  std::vector<StateBox> moments;  // of each half
};

// The boxes of any rank of any layout of one model: the parameter table and views are computed
// once.
class ModelStateBoxes {
 public:
  explicit ModelStateBoxes(const schemas::ModelConfig& model);

  // `rank`'s state under `layout` (nullopt: one device, the whole model in store order). Its
  // values are the whole of its parameters below ZeRO-3, else its shares of its buckets, one
  // after another; its moments likewise from ZeRO-1 on.
  RankStateBoxes of_rank(const std::optional<StateLayout>& layout, std::int64_t rank) const;

  const schemas::ModelConfig& model() const { return model_; }
  const std::vector<ParameterSpec>& parameters() const { return parameters_; }
  const std::vector<ParameterView>& views() const { return views_; }
  std::size_t index_of(const std::string& name) const;  // in parameters()

 private:
  schemas::ModelConfig model_;
  std::vector<ParameterSpec> parameters_;
  std::vector<ParameterView> views_;
  std::unordered_map<std::string, std::size_t> index_of_;
};

struct RankHoldings;

// The boxes of every rank of one layout: what a rank holds by its place on the pipeline, tp, ep
// and etp axes is computed once for all the ranks sharing it (they differ only in their ZeRO
// shard), so a layout of a thousand ranks lists its state in a few hundred milliseconds.
class LayoutStateBoxes {
 public:
  LayoutStateBoxes(const ModelStateBoxes& model, const std::optional<StateLayout>& layout);
  ~LayoutStateBoxes();
  RankStateBoxes of_rank(std::int64_t rank) const;

 private:
  const RankHoldings& holdings(std::int64_t pp_rank, const RankCoordinates& coordinates) const;

  const ModelStateBoxes& model_;
  StateLayout layout_;
  mutable std::map<std::array<std::int64_t, 4>, std::unique_ptr<const RankHoldings>> holdings_;
};

}  // namespace strata::layout
