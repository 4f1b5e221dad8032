#include "strata/schemas/cluster_config.h"

#include <gtest/gtest.h>

#include "fixture_paths.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_builder.h"
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

// The formats' sizes: data bits over 8 plus one byte of scale per block (mxfp8 32, nvfp4 16).
TEST(Dtype, BlockScaledFormatsCarryTheirScales) {
  EXPECT_EQ(dtype_bits(Dtype::nvfp4), 4);
  EXPECT_DOUBLE_EQ(dtype_bytes(Dtype::nvfp4), 0.5625);
  EXPECT_DOUBLE_EQ(dtype_bytes(Dtype::mxfp8), 1.03125);
  EXPECT_DOUBLE_EQ(dtype_bytes(Dtype::fp8), 1.0);
  EXPECT_DOUBLE_EQ(dtype_bytes(Dtype::bf16), 2.0);
  EXPECT_TRUE(quantises_gemms(Dtype::mxfp8));
  EXPECT_FALSE(quantises_gemms(Dtype::bf16));
}

// Block-scaled formats exist where the tensor cores apply the scales: Blackwell has both, the
// MI355X mxfp8 (its fp4 is MXFP4, not modelled), Hopper neither — a plan asking for one there is
// refused with the usual line.
TEST(ClusterConfig, BlockScaledPeaksAreWhereTheHardwareHasThem) {
  const ClusterConfig b200 = cluster_preset("dgx-b200");
  EXPECT_EQ(b200.gpu.peak_dense_tflops.at(Dtype::mxfp8), b200.gpu.peak_dense_tflops.at(Dtype::fp8));
  EXPECT_EQ(b200.gpu.peak_dense_tflops.at(Dtype::nvfp4),
            2 * b200.gpu.peak_dense_tflops.at(Dtype::fp8));
  EXPECT_LT(b200.gpu.gemm_dtype_efficiency.at(Dtype::nvfp4), 1.0);
  EXPECT_EQ(parse_cluster(cluster_to_json(b200), JsonLocation("again")), b200);
  const ClusterConfig mi355x = cluster_preset("amd-mi355x");
  EXPECT_TRUE(mi355x.gpu.peak_dense_tflops.contains(Dtype::mxfp8));
  EXPECT_FALSE(mi355x.gpu.peak_dense_tflops.contains(Dtype::nvfp4));
  EXPECT_FALSE(mi355x.gpu.peak_dense_tflops.contains(Dtype::tf32));
  EXPECT_FALSE(cluster_preset("amd-mi300x").gpu.peak_dense_tflops.contains(Dtype::mxfp8));

  PlanKnobs knobs;
  knobs.mesh.tp = 8;
  knobs.global_batch_size = 8;
  knobs.precision = Dtype::mxfp8;
  EXPECT_NO_THROW(build_plan(model_preset("llama3.1-8b"), b200, knobs, "plan.json"));
  try {
    build_plan(model_preset("llama3.1-8b"), cluster_preset("dgx-h100"), knobs, "plan.json");
    FAIL() << "an mxfp8 plan on an H100 was accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("/precision"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("has no mxfp8 peak"), std::string::npos)
        << error.what();
  }
}

// An NVL72 rack is one node of 72 GPUs on one NVLink domain: gb200-nvl72:4x64 uses 64 GPUs of each
// of four racks, NVLink within a rack and the scale-out network across them.
TEST(ClusterConfig, AnNvl72RackIsOneNvlinkDomain) {
  const ClusterConfig racks = cluster_preset("gb200-nvl72:4x64");
  EXPECT_EQ(racks.world_size(), 256);
  EXPECT_EQ(racks.network_tiers.front().scope_gpus, 64);
  EXPECT_EQ(racks.network_tiers.back().scope_gpus, 256);
  EXPECT_EQ(cluster_preset("gb200-nvl72").network_tiers.front().scope_gpus, 72);
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
