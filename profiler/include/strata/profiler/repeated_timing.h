// Timing one measurement: a warm-up run, then `repeats` timed runs; the median is the value and
// the relative half-range of the runs is the noise it reports (what a second profile of the same
// machine should agree within).
#pragma once

#include <functional>

namespace strata::profiler {

struct Timing {
  double median_s = 0;
  double spread = 0;  // (slowest − fastest) / (2 · median)
};

// Runs `run` once to warm caches and page in buffers, then `repeats` times; each timed run is
// repeated until it has taken at least `least_s` (short kernels are timed in batches). `finish`,
// where given, is called before each clock reading: on a GPU it waits for the queued kernels, so
// a batch is timed by when its last kernel ended, not when it was launched.
Timing time_repeated(const std::function<void()>& run, int repeats, double least_s = 2e-3,
                     const std::function<void()>& finish = nullptr);

// The median and relative half-range of samples (not empty).
Timing summarise(std::vector<double> samples);

}  // namespace strata::profiler
