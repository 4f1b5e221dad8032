// Kernel times: wave quantisation on the FLOPs curve, the launch floor, the efficiency curve.
#include "strata/costmodels/kernel_time.h"

#include <gtest/gtest.h>

#include <vector>

#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

// The FLOPs curve's path (a GPU without gemm_tiles, as the A100 and Blackwell presets are).
TEST(KernelTime, WaveQuantizationChargesTheLastPartialWave) {
  schemas::GpuProfile gpu = schemas::cluster_preset("dgx-h100").gpu;
  gpu.gemm_tiles.reset();
  gpu.gemm_efficiency_by_flops.clear();
  gpu.streaming_multiprocessors = 132;
  // 11 × 12 = 132 tiles of 128×128 fill one wave; 11 × 13 = 143 need two, the second 11/132
  // full: 13/12 of the FLOPs at 143/264 utilisation take (13/12)·(264/143) = 2× as long.
  const double k = 65536;
  const double one_wave = gemm_time_s(gpu, schemas::Dtype::bf16, 128 * 11, 128 * 12, k);
  const double two_waves = gemm_time_s(gpu, schemas::Dtype::bf16, 128 * 11, 128 * 13, k);
  EXPECT_NEAR(two_waves / one_wave, 2.0, 1e-9);
  EXPECT_NEAR(one_wave, 2.0 * (128 * 11) * (128 * 12) * k / 989.4e12, 1e-12);
}

// A kernel takes no less than its launch: with 4 µs per launch, a 64×64×64 GEMM (0.5 MFLOP, half
// a nanosecond of an H100) takes 4 µs, 1 kB of elementwise work over 3 kernels 12 µs, while a
// large GEMM and an epilogue (0 kernels) are unchanged.
TEST(KernelTime, EveryKernelTakesAtLeastItsLaunch) {
  schemas::GpuProfile gpu = schemas::cluster_preset("dgx-h100").gpu;
  gpu.kernel_launch_us = 4;
  EXPECT_DOUBLE_EQ(gemm_time_s(gpu, schemas::Dtype::bf16, 64, 64, 64), 4e-6);
  EXPECT_DOUBLE_EQ(memory_bound_time_s(gpu, 1024, 3), 12e-6);
  EXPECT_LT(memory_bound_time_s(gpu, 1024, 0), 1e-6);
  schemas::GpuProfile unlaunched = gpu;
  unlaunched.kernel_launch_us.reset();
  EXPECT_DOUBLE_EQ(gemm_time_s(gpu, schemas::Dtype::bf16, 8192, 8192, 8192),
                   gemm_time_s(unlaunched, schemas::Dtype::bf16, 8192, 8192, 8192));
}

TEST(KernelTime, EfficiencyCurveInterpolatesInLogSize) {
  const std::vector<schemas::EfficiencyPoint> curve{{1e9, 0.2}, {1e11, 0.6}};
  EXPECT_DOUBLE_EQ(interpolate_efficiency(curve, 1e8), 0.2);
  EXPECT_DOUBLE_EQ(interpolate_efficiency(curve, 1e12), 0.6);
  EXPECT_NEAR(interpolate_efficiency(curve, 1e10), 0.4, 1e-12);
  EXPECT_DOUBLE_EQ(interpolate_efficiency({}, 5), 1.0);
}

}  // namespace
}  // namespace strata::costmodels
