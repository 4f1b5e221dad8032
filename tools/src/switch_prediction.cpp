#include "switch_prediction.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "strata/costmodels/collective_time.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/layout_transfer.h"

namespace strata::tools {

double predicted_switch_seconds(const schemas::Plan& from, const schemas::Plan& to) {
  const std::int64_t world = from.mesh.world_size();
  const executor::LayoutTransfer transfer(from.model, executor::checkpoint_layout_of(from),
                                          executor::checkpoint_layout_of(to), world);
  // Bytes per (source, target) pair of distinct ranks; the state is float32 on every backend.
  constexpr double kStateBytes = 4;
  std::map<std::pair<std::int64_t, std::int64_t>, double> bytes;
  for (const executor::TransferPiece& piece : transfer.pieces()) {
    if (piece.source_rank == piece.target_rank) continue;
    bytes[{piece.source_rank, piece.target_rank}] +=
        kStateBytes * static_cast<double>(piece.length) * (piece.moments ? 2 : 1);
  }
  std::vector<double> sending(static_cast<std::size_t>(world), 0);
  std::vector<double> receiving(static_cast<std::size_t>(world), 0);
  for (const auto& [pair, amount] : bytes) {
    const auto& [source, target] = pair;
    const double seconds = costmodels::point_to_point_time_s(
        to.cluster, costmodels::tier_between(to.cluster, source, target), amount);
    sending[static_cast<std::size_t>(source)] += seconds;
    receiving[static_cast<std::size_t>(target)] += seconds;
  }
  double busiest = 0;
  for (std::int64_t rank = 0; rank < world; ++rank) {
    busiest = std::max({busiest, sending[static_cast<std::size_t>(rank)],
                        receiving[static_cast<std::size_t>(rank)]});
  }
  return busiest;
}

}  // namespace strata::tools
