// A profile's compute measured at its start and again at its end: the merged timings carry the
// machine's drift in their spread, and the drift itself is reported.
#include <gtest/gtest.h>

#include "strata/profiler/compute_measurements.h"

namespace strata::profiler {
namespace {

ComputeMeasurements sweep(double gemm_s, double norm_s, double launch_s) {
  ComputeMeasurements measured;
  measured.gemms.push_back({256, 256, 256, {gemm_s, 0.01}});
  measured.elementwise.push_back({"layer_norm forward", 1e6, 0, 0, {norm_s, 0.02}});
  measured.smallest_op = {launch_s, 0.05};
  return measured;
}

// The machine slowed by 20% on the GEMM and the norm and not on the launch: each merged median
// is the mean, the GEMM's spread grows to half the relative difference (0.2 / 2.2), the
// launch's keeps its own, and the median change is the drift.
TEST(RepeatedSweep, MergesTwoSweepsAndReportsTheDrift) {
  ComputeMeasurements start = sweep(1.0, 2.0, 1e-6);
  ComputeMeasurements end = sweep(1.2, 2.4, 1e-6);
  const double drift = merge_repeated_sweep(start, end);
  EXPECT_NEAR(drift, 0.2, 1e-12);
  EXPECT_NEAR(start.gemms[0].timing.median_s, 1.1, 1e-12);
  EXPECT_NEAR(start.gemms[0].timing.spread, 0.2 / 2.2, 1e-12);
  EXPECT_NEAR(start.elementwise[0].timing.median_s, 2.2, 1e-12);
  EXPECT_EQ(start.smallest_op.median_s, 1e-6);
  EXPECT_EQ(start.smallest_op.spread, 0.05);
}

TEST(RepeatedSweep, RefusesSweepsOfDifferentLists) {
  ComputeMeasurements start = sweep(1.0, 2.0, 1e-6);
  ComputeMeasurements end = sweep(1.0, 2.0, 1e-6);
  end.gemms.push_back(end.gemms[0]);
  EXPECT_THROW(merge_repeated_sweep(start, end), std::logic_error);
}

}  // namespace
}  // namespace strata::profiler
