// ParameterStore's working copy (mixed precision): the model computes with bfloat16 values that
// are the float32 masters rounded, refreshed after the masters change; without a compute type the
// working copy is the masters themselves.
#include "strata/executor/model/parameter_store.h"

#include <gtest/gtest.h>

#include "strata/executor/model/transformer.h"
#include "strata/executor/tensor/bfloat16.h"
#include "strata/schemas/presets.h"
#include "tensor_testing.h"

namespace strata::executor {
namespace {

TEST(ParameterStore, WorkingCopyIsTheMastersRounded) {
  const std::vector<ParameterSpec> specs =
      transformer_parameters(schemas::model_preset("gpt-tiny"));
  ParameterStore store(specs, ScalarType::float32, Device::cpu, ScalarType::bfloat16);
  ASSERT_TRUE(store.has_working_copy());
  store.initialize(7);
  const auto check_rounded = [&] {
    const float* masters = store.values().data<float>();
    const BFloat16* copy = store.compute_values().data<BFloat16>();
    for (std::int64_t i = 0; i < store.total_elements(); ++i) {
      ASSERT_EQ(copy[i].bits, float_to_bfloat16(masters[i]).bits) << i;
    }
  };
  check_rounded();
  // Every entry's compute view points into the copy at the entry's offset.
  const ParameterEntry& qkv = store.entry("layers.0.attention.qkv.weight");
  EXPECT_EQ(qkv.compute.scalar_type(), ScalarType::bfloat16);
  EXPECT_EQ(qkv.compute.raw(),
            static_cast<const BFloat16*>(store.compute_values().raw()) + qkv.offset);
  store.values().data<float>()[qkv.offset] = 0.3f;
  store.refresh_compute_values();
  check_rounded();
}

TEST(ParameterStore, WithoutAComputeTypeTheModelComputesWithTheMasters) {
  ParameterStore store(transformer_parameters(schemas::model_preset("llama-tiny")),
                       ScalarType::float32);
  EXPECT_FALSE(store.has_working_copy());
  for (const ParameterEntry& entry : store.entries()) {
    EXPECT_EQ(entry.compute.raw(), entry.value.raw()) << entry.spec.name;
  }
}

}  // namespace
}  // namespace strata::executor
