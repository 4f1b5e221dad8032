#include "job_phase.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>

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
  executor::Tensor lowest = executor::Tensor::zeros({2}, executor::ScalarType::float64);
  lowest.data<double>()[0] = failure ? world.rank() : world.size();
  lowest.data<double>()[1] = failure ? -failure->exit_code : 0;
  world.all_reduce(lowest, executor::ReduceOp::min);
  executor::Tensor failed = executor::Tensor::zeros({1}, executor::ScalarType::float64);
  failed.data<double>()[0] = failure ? 1 : 0;
  world.all_reduce(failed, executor::ReduceOp::sum);
  const int first = static_cast<int>(lowest.data<double>()[0]);
  if (first == world.size()) return;
  if (first == world.rank()) {
    const bool everyone = static_cast<int>(failed.data<double>()[0]) == world.size();
    std::fprintf(stderr, "strata: %s%s\n",
                 everyone ? "" : fmt::format("rank {}: ", world.rank()).c_str(),
                 failure->line.c_str());
  }
  throw ReportedFailure{static_cast<int>(-lowest.data<double>()[1])};
}

}  // namespace strata::tools
