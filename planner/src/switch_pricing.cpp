#include "strata/planner/switch_pricing.h"

#include <algorithm>
#include <vector>

#include "strata/costmodels/collective_time.h"
#include "strata/layout/state_layout.h"
#include "strata/layout/transfer_plan.h"

namespace strata::planner {

SwitchPrediction predict_switch(const schemas::Plan& from, const schemas::Plan& to) {
  const std::int64_t world = from.mesh.world_size();
  const std::optional<layout::StateLayout> from_layout = layout::state_layout_of(from);
  const std::optional<layout::StateLayout> to_layout = layout::state_layout_of(to);
  // One layout is one placement of every element: nothing moves, and no plan is needed
  // (consecutive phases often keep their layout).
  if (from_layout == to_layout) return {};
  const layout::TransferPlan transfer(from.model, from_layout, to_layout, world);
  // The state is float32 on every backend.
  constexpr std::int64_t kStateBytes = 4;
  std::vector<double> sending(static_cast<std::size_t>(world), 0);
  std::vector<double> receiving(static_cast<std::size_t>(world), 0);
  for (const auto& [pair, elements] : transfer.elements_between()) {
    const std::int64_t source = pair / world;
    const std::int64_t target = pair % world;
    const double seconds = costmodels::point_to_point_time_s(
        to.cluster, costmodels::tier_between(to.cluster, source, target),
        static_cast<double>(kStateBytes * elements));
    sending[static_cast<std::size_t>(source)] += seconds;
    receiving[static_cast<std::size_t>(target)] += seconds;
  }
  SwitchPrediction prediction;
  for (std::int64_t rank = 0; rank < world; ++rank) {
    const auto at = static_cast<std::size_t>(rank);
    prediction.seconds = std::max({prediction.seconds, sending[at], receiving[at]});
    prediction.most_sent_bytes =
        std::max(prediction.most_sent_bytes, kStateBytes * transfer.sent_elements(rank));
    prediction.most_received_bytes =
        std::max(prediction.most_received_bytes, kStateBytes * transfer.received_elements(rank));
  }
  return prediction;
}

schemas::PlanSwitchCost switch_cost(const std::string& from, const std::string& to,
                                    const SwitchPrediction& prediction) {
  return {from, to, prediction.most_sent_bytes, prediction.most_received_bytes, prediction.seconds};
}

}  // namespace strata::planner
