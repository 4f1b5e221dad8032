#include "strata/profiler/communicator_progress.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "strata/executor/ops/residual.h"

namespace strata::profiler {
namespace {

using executor::Tensor;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The largest of the members' values: the group's collective waits for its slowest member.
double largest_over(executor::Communicator& group, double value) {
  Tensor slot = Tensor::zeros({1}, executor::ScalarType::float64);
  slot.data<double>()[0] = value;
  group.all_reduce(slot, executor::ReduceOp::max);
  return slot.data<double>()[0];
}

}  // namespace

ProgressMeasurement measure_communicator_progress(executor::Communicator& group,
                                                  double message_bytes, int repeats) {
  const auto elements = std::max<std::int64_t>(1, static_cast<std::int64_t>(message_bytes / 4));
  Tensor values = Tensor::zeros({elements}, executor::ScalarType::float32);
  std::fill_n(values.data<float>(), values.numel(), 1.0f);
  // What the rank computes meanwhile: element-wise adds over its own buffers, no communicator
  // call among them (as a backward between two bucket issues).
  const std::int64_t work = std::int64_t{1} << 18;
  Tensor a = Tensor::zeros({work}, executor::ScalarType::float32);
  Tensor b = Tensor::zeros({work}, executor::ScalarType::float32);
  Tensor y = Tensor::zeros({work}, executor::ScalarType::float32);
  const auto compute_for = [&](double seconds) {
    const Clock::time_point start = Clock::now();
    do {
      executor::residual_forward(a, b, y);
    } while (seconds_since(start) < seconds);
  };
  // Sums of ones double each time: a maximum keeps the values as they are.
  const auto issue = [&] { return group.all_reduce_async(values, executor::ReduceOp::max); };
  issue().wait();  // warm-up: the communicator's first use sets up its connections

  std::vector<double> alone, waits;
  for (int r = 0; r < repeats; ++r) {
    group.barrier();
    const Clock::time_point start = Clock::now();
    issue().wait();
    alone.push_back(seconds_since(start));
  }
  ProgressMeasurement result;
  result.alone = summarise(alone);
  result.alone.median_s = largest_over(group, result.alone.median_s);
  for (int r = 0; r < repeats; ++r) {
    group.barrier();
    executor::CommunicationRequest request = issue();
    compute_for(2 * result.alone.median_s);
    const Clock::time_point start = Clock::now();
    request.wait();
    waits.push_back(seconds_since(start));
  }
  result.wait_after = summarise(waits);
  result.wait_after.median_s = largest_over(group, result.wait_after.median_s);
  result.fraction = std::clamp(1.0 - result.wait_after.median_s / result.alone.median_s, 0.0, 1.0);
  return result;
}

}  // namespace strata::profiler
