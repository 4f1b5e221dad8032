// The CPU optimizer step (gradient norm, clipping, AdamW) over 16M fp32 parameters — larger than
// any cache, so memory-bound — beside a STREAM-style triad over the same buffers in the same run.
// Counter bytes_per_s counts what a memory-bound step must move: the norm's read of the gradient
// (4 B), AdamW's reads of value, gradient and both moments and writes of value and both moments
// (28 B); the triad moves 12 B (two reads, one write). Their ratio is how close the step runs to
// the machine's streaming bandwidth: the cost model charges the step at that bandwidth.
// Argument clip: 0 = the norm is under the limit, 1 = every step clips.
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/optim/optimizer_step.h"

namespace strata::executor {
namespace {

constexpr std::int64_t kParameters = std::int64_t{1} << 24;

Tensor filled(std::int64_t elements, float value) {
  Tensor tensor = Tensor::zeros({elements}, ScalarType::float32);
  float* data = tensor.data<float>();
  for (std::int64_t i = 0; i < elements; ++i) data[i] = value * static_cast<float>(1 + i % 7);
  return tensor;
}

void BM_OptimizerStep(benchmark::State& state) {
  Eigen::setNbThreads(1);
  ParameterSpec matrix;
  matrix.name = "w";
  matrix.shape = {kParameters};
  matrix.weight_decay = true;
  ParameterStore parameters({matrix}, ScalarType::float32);
  parameters.values().copy_from(filled(kParameters, 0.01f));
  parameters.gradients().copy_from(filled(kParameters, 1e-3f));
  OptimizerMoments moments = OptimizerMoments::zeros_like(parameters);
  // The gradient's norm is about 16; a limit of 1 clips every step, 1e9 never does.
  const double max_norm = state.range(0) == 1 ? 1.0 : 1e9;
  std::int64_t step = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(optimizer_step(parameters, moments, 3e-4, step++, {}, max_norm));
  }
  state.counters["bytes_per_s"] =
      benchmark::Counter(32.0 * kParameters, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_OptimizerStep)->Arg(0)->Arg(1)->ArgName("clip")->Unit(benchmark::kMillisecond);

void BM_StreamTriad(benchmark::State& state) {
  Eigen::setNbThreads(1);
  Tensor a = filled(kParameters, 0.0f);
  const Tensor b = filled(kParameters, 1.0f);
  const Tensor c = filled(kParameters, 2.0f);
  Eigen::Map<Eigen::ArrayXf> x(a.data<float>(), kParameters);
  const Eigen::Map<const Eigen::ArrayXf> y(b.data<float>(), kParameters);
  const Eigen::Map<const Eigen::ArrayXf> z(c.data<float>(), kParameters);
  for (auto _ : state) {
    x = y + 0.5f * z;
    benchmark::DoNotOptimize(a.data<float>());
    benchmark::ClobberMemory();
  }
  state.counters["bytes_per_s"] =
      benchmark::Counter(12.0 * kParameters, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamTriad)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata::executor
