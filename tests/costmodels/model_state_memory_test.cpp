#include "strata/costmodels/model_state_memory.h"

#include <gtest/gtest.h>

namespace strata::costmodels {
namespace {

// ZeRO (Rajbhandari et al. 2020, sec. 3.1): mixed-precision Adam keeps 2 + 2 + 12 = 16 bytes per
// parameter, the 12 being fp32 master weights, momentum and variance.
TEST(ModelStateMemory, Fp16MixedPrecisionAdamIsSixteenBytesPerParameter) {
  const ModelStateBytesPerParameter bytes = adam_model_state_bytes(schemas::Dtype::fp16);
  EXPECT_EQ(bytes.weights, 2);
  EXPECT_EQ(bytes.gradients, 2);
  EXPECT_EQ(bytes.optimizer, 12);
}

// Megatron-LM's distributed-optimizer table: bf16 parameters with fp32 gradients cost 18 bytes
// unsharded and 6 + 12/dp sharded.
TEST(ModelStateMemory, Bf16KeepsFp32GradientsAsMegatronDoes) {
  for (schemas::Dtype dtype : {schemas::Dtype::bf16, schemas::Dtype::fp8}) {
    const ModelStateBytesPerParameter bytes = adam_model_state_bytes(dtype);
    EXPECT_EQ(bytes.weights + bytes.gradients, 6);
    EXPECT_EQ(bytes.optimizer, 12);
  }
}

TEST(ModelStateMemory, Fp32AdamHasNoMasterCopy) {
  const ModelStateBytesPerParameter bytes = adam_model_state_bytes(schemas::Dtype::fp32);
  EXPECT_EQ(bytes.weights + bytes.gradients, 8);
  EXPECT_EQ(bytes.optimizer, 8);
  EXPECT_EQ(bytes.total(), adam_model_state_bytes(schemas::Dtype::tf32).total());
}

}  // namespace
}  // namespace strata::costmodels
