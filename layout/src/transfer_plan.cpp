#include "strata/layout/transfer_plan.h"

#include <algorithm>
#include <array>
#include <map>

#include "layout_check.h"

namespace strata::layout {
namespace {

// Rows [row, row + rows) × columns [col, col + cols) of a parameter's view.
struct Rect {
  std::int64_t row = 0, col = 0, rows = 0, cols = 0;
  std::int64_t elements() const { return rows * cols; }
};

Rect rect_of(const StateBox& box) { return {box.row, box.col, box.rows, box.cols}; }

std::optional<Rect> intersection(const Rect& a, const Rect& b) {
  const std::int64_t top = std::max(a.row, b.row);
  const std::int64_t bottom = std::min(a.row + a.rows, b.row + b.rows);
  const std::int64_t left = std::max(a.col, b.col);
  const std::int64_t right = std::min(a.col + a.cols, b.col + b.cols);
  if (top >= bottom || left >= right) return std::nullopt;
  return Rect{top, left, bottom - top, right - left};
}

bool contains(const Rect& outer, const Rect& inner) {
  return inner.row >= outer.row && inner.row + inner.rows <= outer.row + outer.rows &&
         inner.col >= outer.col && inner.col + inner.cols <= outer.col + outer.cols;
}

// `whole` less `part` (inside it): the rows above and below, and beside it in its rows.
void add_difference(const Rect& whole, const Rect& part, std::vector<Rect>& out) {
  const auto add = [&out](Rect rect) {
    if (rect.rows > 0 && rect.cols > 0) out.push_back(rect);
  };
  add({whole.row, whole.col, part.row - whole.row, whole.cols});
  add({part.row + part.rows, whole.col, whole.row + whole.rows - part.row - part.rows, whole.cols});
  add({part.row, whole.col, part.rows, part.col - whole.col});
  add({part.row, part.col + part.cols, part.rows, whole.col + whole.cols - part.col - part.cols});
}

std::int64_t offset_in(const StateBox& box, const Rect& rect) {
  return box.offset + (rect.row - box.row) * box.pitch + (rect.col - box.col);
}

struct Holder {
  StateBox box;
  std::int64_t rank = 0;
};
// The ranks holding one rectangle of a parameter under the old layout (replicas hold the same).
struct HeldRect {
  Rect rect;
  std::vector<Holder> holders;
};
// One parameter's holders under the old layout: each box in rank order, and grouped by rectangle,
// the rectangles by first row with the furthest row each prefix reaches (so that the rectangles
// meeting a row range are found without visiting every shard of a sharded parameter).
struct ParameterHolders {
  std::vector<Holder> by_rank;
  std::vector<HeldRect> by_rect;
  std::vector<std::int64_t> reach;
  std::map<std::array<std::int64_t, 4>, std::size_t> rect_index;

  void add(const StateBox& box, std::int64_t rank) {
    by_rank.push_back({box, rank});
    const auto [at, fresh] =
        rect_index.try_emplace({box.row, box.col, box.rows, box.cols}, by_rect.size());
    if (fresh) by_rect.push_back({rect_of(box), {}});
    by_rect[at->second].holders.push_back({box, rank});
  }
  void index() {
    rect_index.clear();
    std::stable_sort(by_rect.begin(), by_rect.end(),
                     [](const HeldRect& a, const HeldRect& b) { return a.rect.row < b.rect.row; });
    reach.resize(by_rect.size());
    std::int64_t furthest = 0;
    for (std::size_t i = 0; i < by_rect.size(); ++i) {
      furthest = std::max(furthest, by_rect[i].rect.row + by_rect[i].rect.rows);
      reach[i] = furthest;
    }
  }
  // Calls `visit` with every rectangle meeting `rect`'s rows until it returns true.
  template <typename Visit>
  void meeting_rows(const Rect& rect, Visit&& visit) const {
    auto i =
        static_cast<std::size_t>(std::partition_point(by_rect.begin(), by_rect.end(),
                                                      [&](const HeldRect& held) {
                                                        return held.rect.row < rect.row + rect.rows;
                                                      }) -
                                 by_rect.begin());
    while (i > 0 && reach[i - 1] > rect.row) {
      --i;
      if (by_rect[i].rect.row + by_rect[i].rect.rows > rect.row && visit(by_rect[i])) return;
    }
  }
};
using Holders = std::vector<ParameterHolders>;

}  // namespace

TransferPlan::TransferPlan(const schemas::ModelConfig& model,
                           const std::optional<StateLayout>& from,
                           const std::optional<StateLayout>& to, std::int64_t world_size)
    : world_size_(world_size),
      sent_(static_cast<std::size_t>(world_size), 0),
      received_(static_cast<std::size_t>(world_size), 0),
      target_values_(static_cast<std::size_t>(world_size), 0),
      target_moments_(static_cast<std::size_t>(world_size), 0) {
  STRATA_LAYOUT_CHECK(world_size >= 1, "a transfer over {} ranks", world_size);
  // A plan of one rank has the one-device layout, any other plan a parallel one.
  STRATA_LAYOUT_CHECK((!from || from->mesh.world_size() == world_size) &&
                          (!to || to->mesh.world_size() == world_size) &&
                          from.has_value() == (world_size > 1) &&
                          to.has_value() == (world_size > 1),
                      "a transfer over {} ranks between layouts of {} and {} ranks", world_size,
                      from ? from->mesh.world_size() : 1, to ? to->mesh.world_size() : 1);
  const ModelStateBoxes state_boxes(model);
  const LayoutStateBoxes old_boxes(state_boxes, from), new_boxes(state_boxes, to);
  const std::size_t parameters = state_boxes.parameters().size();
  Holders held_values(parameters), held_moments(parameters);
  for (std::int64_t rank = 0; rank < world_size; ++rank) {
    const RankStateBoxes state = old_boxes.of_rank(rank);
    for (const StateBox& box : state.values) held_values[box.parameter].add(box, rank);
    for (const StateBox& box : state.moments) held_moments[box.parameter].add(box, rank);
  }
  for (ParameterHolders& holders : held_values) holders.index();
  for (ParameterHolders& holders : held_moments) holders.index();
  const auto sent_by = [this](std::int64_t rank) -> std::int64_t& {
    return sent_[static_cast<std::size_t>(rank)];
  };
  const auto add_box = [&](const Holder& source, const StateBox& want, const Rect& rect,
                           std::int64_t target, bool moments) {
    boxes_.push_back({source.rank, target, moments, rect.rows, rect.cols,
                      offset_in(source.box, rect), source.box.pitch, offset_in(want, rect),
                      want.pitch});
    if (source.rank == target) return;
    const std::int64_t elements = (moments ? 2 : 1) * rect.elements();
    sent_by(source.rank) += elements;
    received_[static_cast<std::size_t>(target)] += elements;
    elements_between_[source.rank * world_size_ + target] += elements;
  };
  // Fills `want` of `target`'s new state from the old holders (`missing` and `still`: what is
  // left to cover, kept from one box to the next).
  std::vector<Rect> missing, still;
  const auto cover = [&](const Holders& held, bool moments, std::int64_t target,
                         const StateBox& want) {
    const ParameterHolders& holders = held[want.parameter];
    missing.assign(1, rect_of(want));
    // What the target held itself.
    const auto own_begin =
        std::partition_point(holders.by_rank.begin(), holders.by_rank.end(),
                             [target](const Holder& h) { return h.rank < target; });
    const auto own_end = std::partition_point(
        own_begin, holders.by_rank.end(), [target](const Holder& h) { return h.rank == target; });
    for (auto holder = own_begin; holder != own_end && !missing.empty(); ++holder) {
      still.clear();
      for (const Rect& rect : missing) {
        const std::optional<Rect> common = intersection(rect, rect_of(holder->box));
        if (!common) {
          still.push_back(rect);
          continue;
        }
        add_box(*holder, want, *common, target, moments);
        add_difference(rect, *common, still);
      }
      std::swap(missing, still);
    }
    // The rest from the other holders: each part from the one of its holders that has sent least
    // so far (across a switch's many parts, replicas share the sending).
    while (!missing.empty()) {
      const Rect rect = missing.back();
      missing.pop_back();
      std::optional<Rect> part;
      holders.meeting_rows(rect, [&](const HeldRect& held_rect) {
        const bool others = held_rect.holders.size() > 1 || held_rect.holders[0].rank != target;
        return others && (part = intersection(rect, held_rect.rect)).has_value();
      });
      STRATA_LAYOUT_CHECK(part.has_value(),
                          "rows {}+{} × columns {}+{} of parameter {} are held by no rank of the "
                          "old layout",
                          rect.row, rect.rows, rect.col, rect.cols,
                          state_boxes.parameters()[want.parameter].name);
      add_difference(rect, *part, missing);
      const Holder* source = nullptr;
      holders.meeting_rows(*part, [&](const HeldRect& held_rect) {
        if (!contains(held_rect.rect, *part)) return false;
        for (const Holder& holder : held_rect.holders) {
          if (holder.rank == target) continue;
          if (source == nullptr || sent_by(holder.rank) < sent_by(source->rank) ||
              (sent_by(holder.rank) == sent_by(source->rank) && holder.rank < source->rank)) {
            source = &holder;
          }
        }
        return false;
      });
      add_box(*source, want, *part, target, moments);
    }
  };
  for (std::int64_t target = 0; target < world_size; ++target) {
    const RankStateBoxes state = new_boxes.of_rank(target);
    target_values_[static_cast<std::size_t>(target)] = state.values_elements;
    target_moments_[static_cast<std::size_t>(target)] = state.moments_elements;
    for (const StateBox& want : state.values) cover(held_values, false, target, want);
    for (const StateBox& want : state.moments) cover(held_moments, true, target, want);
  }
}

std::int64_t TransferPlan::sent_elements(std::int64_t rank) const {
  return sent_.at(static_cast<std::size_t>(rank));
}

std::int64_t TransferPlan::received_elements(std::int64_t rank) const {
  return received_.at(static_cast<std::size_t>(rank));
}

std::int64_t TransferPlan::target_values_elements(std::int64_t rank) const {
  return target_values_.at(static_cast<std::size_t>(rank));
}

std::int64_t TransferPlan::target_moments_elements(std::int64_t rank) const {
  return target_moments_.at(static_cast<std::size_t>(rank));
}

}  // namespace strata::layout
