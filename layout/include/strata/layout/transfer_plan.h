// TransferPlan: a run's state moved from one state layout to another, in boxes (state_boxes.h).
// Every box of a rank's new state is taken from ranks that held it under the old layout: from the
// rank itself wherever it held it (so a pair of identical layouts moves nothing), otherwise from
// the old holders of each part, which share the sending — each part comes from the one of its
// holders that has sent least so far. Every rank
// computes the same plan from the two layouts alone. The executor's switch runs it
// (executor/checkpoint/layout_transfer.h) and the planner prices it (planner/switch_pricing.h):
// what is predicted is what runs.
//
// Its size is a few boxes per parameter and rank — a tensor-parallel slice cut by a ZeRO shard's
// range is at most three boxes per segment — so a switch of a 70B model on 1,024 ranks is planned
// in about a second, not a run per row of every row-split weight.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "strata/layout/state_boxes.h"
#include "strata/layout/state_layout.h"

namespace strata::layout {

// `rows` × `cols` elements from the source rank's state tensor (row r, column c at
// source_offset + r · source_pitch + c) to the target rank's (target_offset + r · target_pitch +
// c): of the values, or of both halves of the moments (the same offsets in each).
struct TransferBox {
  std::int64_t source_rank = 0, target_rank = 0;
  bool moments = false;
  std::int64_t rows = 0, cols = 0;
  std::int64_t source_offset = 0, source_pitch = 0;
  std::int64_t target_offset = 0, target_pitch = 0;
  std::int64_t elements() const { return rows * cols; }
};

class TransferPlan {
 public:
  // `from` and `to`: state layouts (nullopt: one device) of `model` on `world_size` ranks.
  TransferPlan(const schemas::ModelConfig& model, const std::optional<StateLayout>& from,
               const std::optional<StateLayout>& to, std::int64_t world_size);

  std::int64_t world_size() const { return world_size_; }
  // Every box, grouped by target rank, in the order that rank's new state is filled.
  const std::vector<TransferBox>& boxes() const { return boxes_; }
  // Elements (a moments box counts both halves) from each source rank to each other target rank,
  // keyed source · world_size + target; pairs that exchange nothing are absent.
  const std::unordered_map<std::int64_t, std::int64_t>& elements_between() const {
    return elements_between_;
  }
  // Elements `rank` sends to and receives from other ranks (a moments box counts both halves).
  std::int64_t sent_elements(std::int64_t rank) const;
  std::int64_t received_elements(std::int64_t rank) const;
  // The sizes of `rank`'s state tensors under the new layout (values; one half of the moments).
  std::int64_t target_values_elements(std::int64_t rank) const;
  std::int64_t target_moments_elements(std::int64_t rank) const;

 private:
  std::int64_t world_size_;
  std::vector<TransferBox> boxes_;
  std::unordered_map<std::int64_t, std::int64_t> elements_between_;
  std::vector<std::int64_t> sent_, received_;
  std::vector<std::int64_t> target_values_, target_moments_;
};

}  // namespace strata::layout
