#include "strata/schemas/cluster_config.h"

#include <gtest/gtest.h>

#include "fixture_paths.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/presets.h"

namespace strata::schemas {
namespace {

using strata::testing::fixture;

TEST(ClusterConfig, ReservedMemoryAddsContextBuffersAndSlack) {
  const ClusterConfig cluster = load_cluster_file(fixture("cluster/valid/nvl72-rack.json"));
  // 1 GiB context + 2 GiB NCCL + ceil(0.05 × 192e9) = 1073741824 + 2147483648 + 9600000000.
  EXPECT_EQ(cluster.reserved_bytes(), 12821225472);
  EXPECT_EQ(cluster.usable_memory_bytes(), 192000000000 - 12821225472);
  EXPECT_EQ(cluster.world_size(), 144);
}

TEST(ClusterConfig, EfficiencyCurvesAreKeptInOrder) {
  const ClusterConfig cluster = load_cluster_file(fixture("cluster/valid/h100-with-curves.json"));
  ASSERT_EQ(cluster.gpu.gemm_efficiency_by_flops.size(), 3u);
  EXPECT_EQ(cluster.gpu.gemm_efficiency_by_flops[1], (EfficiencyPoint{1e11, 0.65}));
  ASSERT_EQ(cluster.network_tiers[0].efficiency_by_message_bytes.size(), 2u);
  EXPECT_EQ(cluster.gpu.peak_dense_tflops.at(Dtype::fp8), 1978.9);
}

TEST(ClusterConfig, DefaultPrecisionIsBf16OrTheNarrowestOtherTheGpuHas) {
  GpuProfile gpu;
  gpu.peak_dense_tflops = {{Dtype::fp32, 67}, {Dtype::tf32, 494}, {Dtype::bf16, 989}};
  EXPECT_EQ(default_training_precision(gpu), Dtype::bf16);
  gpu.peak_dense_tflops = {{Dtype::fp32, 19.5}, {Dtype::fp16, 125}, {Dtype::fp8, 250}};
  EXPECT_EQ(default_training_precision(gpu), Dtype::fp16);  // fp8 only when asked for
  gpu.peak_dense_tflops = {{Dtype::fp32, 19.5}, {Dtype::tf32, 156}};
  EXPECT_EQ(default_training_precision(gpu), Dtype::tf32);
  gpu.peak_dense_tflops = {{Dtype::fp32, 0.05}};
  EXPECT_EQ(default_training_precision(gpu), Dtype::fp32);
  EXPECT_EQ(default_training_precision(cluster_preset("cpu-local").gpu), Dtype::fp32);
}

TEST(ClusterConfig, EveryValidFixtureRoundTripsThroughItsSerialization) {
  for (const auto& entry : std::filesystem::directory_iterator(fixture("cluster/valid"))) {
    const ClusterConfig cluster = load_cluster_file(entry.path());
    EXPECT_EQ(parse_cluster(cluster_to_json(cluster), JsonLocation("again")), cluster)
        << entry.path();
  }
}

}  // namespace
}  // namespace strata::schemas
