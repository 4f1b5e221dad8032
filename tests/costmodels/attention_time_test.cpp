#include "strata/costmodels/attention_time.h"

#include <gtest/gtest.h>

#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using schemas::AttentionKernel;

// A GPU with round numbers: 100 TFLOP/s bf16, products at half of it, 1 T exp/s.
schemas::GpuProfile round_gpu() {
  schemas::GpuProfile gpu;
  gpu.name = "round";
  gpu.peak_dense_tflops[schemas::Dtype::bf16] = 100;
  gpu.hbm_bandwidth_gb_per_s = 1000;
  gpu.attention_efficiency = 0.5;
  gpu.special_function_tops = 1;
  gpu.unfused_attention_efficiency = 0.1;
  return gpu;
}

// b = 1, 2 heads of 64, 1,024 causal tokens. Flash computes the causal half plus half a 128-key
// tile per query: 2 × 1024 × (512 + 64) = 1,179,648 scores. Forward: 4·64 FLOPs each at 50 TFLOP/s
// (6.0398e-6 s) plus one exponential each at 1 T/s (1.1796e-6 s); backward 10·64 FLOPs each
// (1.50995e-5 s) plus the exponential again.
TEST(AttentionTime, FlashIsTensorCoreProductsPlusExponentialsByHand) {
  const AttentionShape shape{
      .batch = 1, .heads = 2, .query_tokens = 1024, .key_tokens = 1024, .head_dim = 64};
  const double scores = 2.0 * 1024 * 576;
  const AttentionTime time =
      attention_time(round_gpu(), schemas::Dtype::bf16, AttentionKernel::flash, shape);
  EXPECT_DOUBLE_EQ(time.forward_s, 4 * 64 * scores / 50e12 + scores / 1e12);
  EXPECT_DOUBLE_EQ(time.backward_s, 10 * 64 * scores / 50e12 + scores / 1e12);
  // fp8 training runs attention in bf16.
  const AttentionTime fp8 =
      attention_time(round_gpu(), schemas::Dtype::fp8, AttentionKernel::flash, shape);
  EXPECT_DOUBLE_EQ(fp8.forward_s, time.forward_s);
}

// Unfused attention at its own efficiency on the useful causal FLOPs: 4·b·H·s²·d·½ =
// 268,435,456 forward at 10 TFLOP/s, 2.5× that backward.
TEST(AttentionTime, UnfusedIsTheCausalFlopsAtItsEfficiency) {
  const AttentionShape shape{
      .batch = 1, .heads = 2, .query_tokens = 1024, .key_tokens = 1024, .head_dim = 64};
  const AttentionFlops flops = causal_attention_flops(shape);
  EXPECT_DOUBLE_EQ(flops.forward, 268435456.0);
  const AttentionTime time =
      attention_time(round_gpu(), schemas::Dtype::bf16, AttentionKernel::unfused, shape);
  EXPECT_DOUBLE_EQ(time.forward_s, 268435456.0 / 10e12);
  EXPECT_DOUBLE_EQ(time.backward_s, 2.5 * 268435456.0 / 10e12);
}

// The mechanisms give the shape dependence one efficiency per GPU cannot: on an H100, flash
// attention reaches a larger fraction of peak with larger heads (the exponentials are a smaller
// share) and with longer sequences (the diagonal tiles are a smaller share).
TEST(AttentionTime, FlashEfficiencyGrowsWithHeadDimensionAndSequenceLength) {
  const schemas::GpuProfile gpu = schemas::cluster_preset("dgx-h100").gpu;
  const auto achieved = [&](double head_dim, double seq) {
    const AttentionShape shape{
        .batch = 1, .heads = 8, .query_tokens = seq, .key_tokens = seq, .head_dim = head_dim};
    const AttentionFlops flops = causal_attention_flops(shape);
    const AttentionTime time =
        attention_time(gpu, schemas::Dtype::bf16, AttentionKernel::flash, shape);
    return flops.forward / time.forward_s / 989.4e12;
  };
  EXPECT_LT(achieved(64, 4096), achieved(128, 4096));
  EXPECT_LT(achieved(128, 4096), achieved(256, 4096));
  EXPECT_LT(achieved(128, 1024), achieved(128, 4096));
  EXPECT_LT(achieved(128, 4096), achieved(128, 16384));
  // Never above the products' own efficiency.
  EXPECT_LT(achieved(256, 16384), *gpu.attention_efficiency);
}

}  // namespace
}  // namespace strata::costmodels
