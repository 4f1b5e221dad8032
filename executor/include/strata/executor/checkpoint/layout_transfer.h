// LayoutTransfer: a run's state moved from one layout to another in memory, with collectives
// only — the layout component's transfer plan (layout/transfer_plan.h: boxes of each rank's new
// state taken from their old holders, the rank itself wherever it can) run over the job. Each
// rank's state tensors are what its checkpoint files would hold: its values (whole store, or its
// ZeRO-3 shards) and each half of its AdamW moments (whole, or its ZeRO ≥ 1 shards). No rank ever
// holds more of the model than its two layouts' state plus the pieces in flight, and no file is
// written. The planner prices the same plan (planner/switch_pricing.h).
//
// Every rank computes the same plan from the two layout blocks alone, so the exchange of each
// state part (values, first moments, second moments) is one all-to-all of each rank's boxes,
// packed in plan order.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "strata/executor/distributed/communicator.h"
#include "strata/executor/tensor/tensor.h"
#include "strata/layout/transfer_plan.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// One of a rank's three state tensors.
enum class StatePart { values, first_moments, second_moments };

// A rank's state tensors: its values and the two halves of its AdamW moments, as the sharded
// optimizer holds them (ShardedOptimizer::values_state and moments_state).
struct RankState {
  Tensor* values = nullptr;
  Tensor* first_moments = nullptr;
  Tensor* second_moments = nullptr;
};

class LayoutTransfer {
 public:
  // `from` and `to`: state layouts (layout::state_layout_of; none: one device) of the same model
  // on `world_size` ranks.
  LayoutTransfer(const schemas::ModelConfig& model, const std::optional<layout::StateLayout>& from,
                 const std::optional<layout::StateLayout>& to, std::int64_t world_size);

  const layout::TransferPlan& plan() const { return plan_; }
  // Elements `rank` sends to and receives from other ranks (a moments box counts both halves).
  std::int64_t sent_elements(std::int64_t rank) const { return plan_.sent_elements(rank); }
  std::int64_t received_elements(std::int64_t rank) const { return plan_.received_elements(rank); }
  // The sizes of `rank`'s state tensors under the new layout (values; one half of the moments).
  std::int64_t target_values_elements(std::int64_t rank) const {
    return plan_.target_values_elements(rank);
  }
  std::int64_t target_moments_elements(std::int64_t rank) const {
    return plan_.target_moments_elements(rank);
  }

  // This rank's part, collective over `world` (the job's communicator, every rank calling it):
  // `to` is filled from every rank's `from`, part by part. All six tensors have one floating type.
  void run(Communicator& world, const RankState& from, const RankState& to) const;
  // One part of it, an all-to-all of its own: a caller can free each old tensor as soon as its
  // part has moved (Trainer::switch_to does, so that two layouts' whole state never coexist).
  void run_part(Communicator& world, StatePart part, const Tensor& from, Tensor& to) const;

 private:
  layout::TransferPlan plan_;
};

}  // namespace strata::executor
