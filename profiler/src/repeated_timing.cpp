#include "strata/profiler/repeated_timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace strata::profiler {

Timing summarise(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  const double median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  return {median, median > 0 ? (samples.back() - samples.front()) / (2 * median) : 0};
}

Timing time_repeated(const std::function<void()>& run, int repeats, double least_s,
                     const std::function<void()>& finish) {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  if (finish) {
    // A GPU's first call also pays one-time setup (the GEMM library's heuristics, first-touch of
    // its workspace): warmed once more, so the run that sizes the batches is a steady one.
    run();
    finish();
  }
  const Clock::time_point warm_start = Clock::now();
  run();
  if (finish) finish();
  const double once_s = seconds(Clock::now() - warm_start);
  // Runs per sample: enough that one sample takes least_s, so a clock tick does not dominate.
  const int batch =
      once_s >= least_s ? 1 : static_cast<int>(std::min(1e6, least_s / std::max(once_s, 1e-9))) + 1;
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    const Clock::time_point start = Clock::now();
    for (int j = 0; j < batch; ++j) run();
    if (finish) finish();
    samples.push_back(seconds(Clock::now() - start) / batch);
  }
  return summarise(std::move(samples));
}

}  // namespace strata::profiler
