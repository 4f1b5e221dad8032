// CUDA against the CPU for the optimizer: the fused step (global-norm clipping on the device,
// AdamW, the bfloat16 working copy's refresh) over a whole parameter store, with clipping active
// and not; adamw_update on one tensor; the loss sum; the caching allocator's reuse.
#include <gtest/gtest.h>

#include "cuda_testing.h"
#include "strata/executor/model/transformer.h"
#include "strata/executor/ops/reduction.h"
#include "strata/executor/optim/adamw.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

using testing::from_gpu;
using testing::on_gpu;

std::vector<ParameterSpec> tiny_specs() {
  return transformer_parameters(schemas::model_preset("llama-tiny"));
}

void fill_random(Tensor& host, std::uint32_t seed, double scale) {
  host.copy_from(testing::random_tensor(host.shape(), host.scalar_type(), seed, scale));
}

class CudaOptimizer : public testing::CudaTest, public ::testing::WithParamInterface<double> {};

TEST_P(CudaOptimizer, FusedStepMatchesTheCpuStep) {
  const double max_norm = GetParam();
  ParameterStore cpu(tiny_specs(), ScalarType::float32);
  ParameterStore gpu(tiny_specs(), ScalarType::float32, Device::cuda, ScalarType::bfloat16);
  cpu.initialize(3);
  gpu.initialize(3);
  OptimizerMoments cpu_moments = OptimizerMoments::zeros_like(cpu);
  OptimizerMoments gpu_moments = OptimizerMoments::zeros_like(gpu);
  AdamWConfig config;
  config.beta2 = 0.99;
  for (std::int64_t step = 0; step < 3; ++step) {
    fill_random(cpu.gradients(), static_cast<std::uint32_t>(10 + step), 1e-3);
    gpu.gradients().copy_from(cpu.gradients());
    const double cpu_norm = optimizer_step(cpu, cpu_moments, 1e-2, step, config, max_norm);
    const double gpu_norm = optimizer_step(gpu, gpu_moments, 1e-2, step, config, max_norm);
    EXPECT_NEAR(gpu_norm, cpu_norm, 1e-6 * cpu_norm) << "step " << step;
  }
  const Tensor cpu_values = testing::to_float64(cpu.values());
  EXPECT_LE(testing::normalized_error(from_gpu(gpu.values()), cpu_values), 1e-6);
  EXPECT_LE(testing::normalized_error(from_gpu(gpu_moments.first),
                                      testing::to_float64(cpu_moments.first)),
            1e-6);
  EXPECT_LE(testing::normalized_error(from_gpu(gpu_moments.second),
                                      testing::to_float64(cpu_moments.second)),
            1e-6);
  // The working copy is the masters rounded to bfloat16 (a master a few ulp from the CPU's may
  // round to the neighbouring bfloat16: 1e-4 allows a few hundred of those in 3M).
  EXPECT_LE(testing::normalized_error(from_gpu(gpu.compute_values()),
                                      testing::rounded_to(cpu_values, ScalarType::bfloat16)),
            1e-4);
}

// 1e-3 gradients over 3M parameters have a norm near 1.7: 0.5 clips them, 100 does not.
INSTANTIATE_TEST_SUITE_P(ClipNorms, CudaOptimizer, ::testing::Values(0.5, 100.0));

class CudaOptimizerParts : public testing::CudaTest {};

TEST_F(CudaOptimizerParts, AdamWUpdateOfOneTensorMatchesTheCpu) {
  Tensor parameter = testing::random_tensor({1000}, ScalarType::float32, 1);
  const Tensor gradient = testing::random_tensor({1000}, ScalarType::float32, 2);
  Tensor first = testing::random_tensor({1000}, ScalarType::float32, 3, 0.1);
  Tensor second = testing::random_tensor({1000}, ScalarType::float32, 4, 0.1);
  for (std::int64_t i = 0; i < 1000; ++i) second.data<float>()[i] *= second.data<float>()[i];
  Tensor parameter_gpu = parameter.to(Device::cuda), first_gpu = first.to(Device::cuda);
  Tensor second_gpu = second.to(Device::cuda);
  const AdamWConfig config;
  // A clipping factor too: the GPU scales a copy, the CPU scales as it reads.
  const Tensor gradient_gpu = gradient.to(Device::cuda);
  adamw_update(parameter, gradient, first, second, 3e-3, 0.1, 4, config, 0.37);
  adamw_update(parameter_gpu, gradient_gpu, first_gpu, second_gpu, 3e-3, 0.1, 4, config, 0.37);
  EXPECT_LE(testing::normalized_error(from_gpu(parameter_gpu), testing::to_float64(parameter)),
            1e-6);
  EXPECT_LE(testing::normalized_error(from_gpu(second_gpu), testing::to_float64(second)), 1e-6);
  EXPECT_EQ(testing::normalized_error(from_gpu(gradient_gpu), testing::to_float64(gradient)), 0.0);
}

TEST_F(CudaOptimizerParts, SumIsTakenOnTheDeviceInFloat64) {
  const Tensor values = testing::random_tensor({100003}, ScalarType::float32, 5);
  EXPECT_NEAR(sum_of(values.to(Device::cuda)), sum_of(values), 1e-9 * values.numel());
}

TEST_F(CudaOptimizerParts, TheAllocatorReusesReleasedBlocks) {
  const void* first = nullptr;
  {
    const Tensor block = Tensor::zeros({1 << 20}, ScalarType::float32, Device::cuda);
    first = block.raw();
  }
  const DeviceMemoryStats before = cuda_memory_stats();
  const Tensor again = Tensor::zeros({1 << 20}, ScalarType::float32, Device::cuda);
  EXPECT_EQ(again.raw(), first);
  EXPECT_EQ(cuda_memory_stats().reserved_bytes, before.reserved_bytes);
  EXPECT_GE(cuda_memory_stats().allocated_bytes, std::size_t{4} << 20);
}

}  // namespace
}  // namespace strata::executor
