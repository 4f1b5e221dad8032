#include "job_phase.h"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <optional>

#include "strata/executor/distributed/typed_collectives.h"

namespace strata::tools {

void run_phase(executor::Communicator& world, const std::function<void()>& phase) {
  if (world.size() == 1) {
    phase();
    return;
  }
  std::optional<FailureReport> failure;
  try {
    phase();
  } catch (...) {
    failure = failure_report(std::current_exception());
  }
  // The lowest failing rank (the world size: none) and the most severe exit code, negated.
  const std::array<double, 2> lowest =
      executor::all_reduce_values<2>(world,
                                     {static_cast<double>(failure ? world.rank() : world.size()),
                                      failure ? -static_cast<double>(failure->exit_code) : 0.0},
                                     executor::ReduceOp::min);
  const double failed =
      executor::all_reduce_value(world, failure ? 1.0 : 0.0, executor::ReduceOp::sum);
  const int first = static_cast<int>(lowest[0]);
  if (first == world.size()) return;
  if (first == world.rank()) {
    const bool everyone = static_cast<int>(failed) == world.size();
    std::fprintf(stderr, "strata: %s%s\n",
                 everyone ? "" : fmt::format("rank {}: ", world.rank()).c_str(),
                 failure->line.c_str());
  }
  throw ReportedFailure{static_cast<int>(-lowest[1])};
}

}  // namespace strata::tools
