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

// Gradients reduced in bf16 (Megatron-Core's grad_reduce_in_fp32 = false, the plan's
// gradient_dtype) halve the gradient buffer and leave the fp32 master and moments as they are:
// 2 + 2 + 12 = 16. fp16 with fp32 gradients goes the other way: 2 + 4 + 12.
TEST(ModelStateMemory, AGradientDtypeSetsTheGradientBytesOnly) {
  for (schemas::Dtype dtype : {schemas::Dtype::bf16, schemas::Dtype::fp8, schemas::Dtype::mxfp8}) {
    const ModelStateBytesPerParameter bytes = adam_model_state_bytes(dtype, schemas::Dtype::bf16);
    EXPECT_EQ(bytes, (ModelStateBytesPerParameter{2, 2, 12}));
    EXPECT_EQ(adam_model_state_bytes(dtype, schemas::default_gradient_dtype(dtype)),
              adam_model_state_bytes(dtype));
  }
  EXPECT_EQ(adam_model_state_bytes(schemas::Dtype::fp16, schemas::Dtype::fp32),
            (ModelStateBytesPerParameter{2, 4, 12}));
  EXPECT_TRUE(schemas::allows_gradient_dtype(schemas::Dtype::nvfp4, schemas::Dtype::bf16));
  EXPECT_FALSE(schemas::allows_gradient_dtype(schemas::Dtype::fp32, schemas::Dtype::bf16));
  EXPECT_FALSE(schemas::allows_gradient_dtype(schemas::Dtype::fp16, schemas::Dtype::bf16));
  EXPECT_FALSE(schemas::allows_gradient_dtype(schemas::Dtype::bf16, schemas::Dtype::fp8));
}

TEST(ModelStateMemory, Fp32AdamHasNoMasterCopy) {
  const ModelStateBytesPerParameter bytes = adam_model_state_bytes(schemas::Dtype::fp32);
  EXPECT_EQ(bytes.weights + bytes.gradients, 8);
  EXPECT_EQ(bytes.optimizer, 8);
  EXPECT_EQ(bytes.total(), adam_model_state_bytes(schemas::Dtype::tf32).total());
}

}  // namespace
}  // namespace strata::costmodels
