// One training step (forward, backward, clipping, AdamW) of a GPT-2 124M-shaped model on the CPU:
// Strata's executor, and PyTorch (Debian's build, torch_training_step.py) doing the same step in
// the same run, on the same number of threads. Arguments: layers (2 or 12; hidden 768, 12 heads,
// vocabulary 50257) and threads (1 or 2: Eigen's OpenMP threads; torch's intra-op threads and
// OpenBLAS threads); 2 sequences of 128 tokens per step. Counter tokens_per_s; compare row pairs.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/executor/model/transformer.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

constexpr std::int64_t kBatch = 2;
constexpr std::int64_t kSeq = 128;

schemas::ModelConfig gpt2_shaped(std::int64_t layers) {
  schemas::ModelConfig model = schemas::model_preset("gpt2-124m");
  model.num_layers = layers;
  model.dropout = 0.0;
  return model;
}

void BM_StrataTrainingStep(benchmark::State& state) {
  Eigen::setNbThreads(static_cast<int>(state.range(1)));
  Transformer transformer(gpt2_shaped(state.range(0)), ScalarType::float32, 1);
  ParameterStore& parameters = transformer.parameters();
  Tensor inputs = Tensor::zeros({kBatch, kSeq}, ScalarType::int32);
  Tensor targets = Tensor::zeros({kBatch, kSeq}, ScalarType::int32);
  for (std::int64_t i = 0; i < inputs.numel(); ++i) {
    inputs.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 7919) % 50257);
    targets.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 104729) % 50257);
  }
  OptimizerMoments moments = OptimizerMoments::zeros_like(parameters);
  const AdamWConfig adamw;
  std::int64_t step = 0;
  for (auto _ : state) {
    parameters.zero_gradients();
    const double loss = transformer.forward_backward(inputs, targets, 1.0 / (kBatch * kSeq), {});
    benchmark::DoNotOptimize(loss);
    optimizer_step(parameters, moments, 3e-4, step++, adamw, 1.0);
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(kBatch * kSeq), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StrataTrainingStep)
    ->ArgsProduct({{2, 12}, {1, 2}})
    ->ArgNames({"layers", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

void BM_TorchTrainingStep(benchmark::State& state) {
  // BLAS threads too: Debian's torch calls the system BLAS (OpenBLAS when installed).
  const std::string threads = std::to_string(state.range(1));
  const std::string command =
      "OPENBLAS_NUM_THREADS=" + threads + " OMP_NUM_THREADS=" + threads +
      " /usr/bin/python3 " STRATA_BENCH_DIR "/executor/torch_training_step.py --layers " +
      std::to_string(state.range(0)) + " --threads " + threads + " --batch " +
      std::to_string(kBatch) + " --seq " + std::to_string(kSeq) + " 2>/dev/null";
  for (auto _ : state) {
    std::FILE* pipe = ::popen(command.c_str(), "r");
    std::string output;
    char buffer[512];
    while (pipe != nullptr && std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
    const int status = pipe != nullptr ? ::pclose(pipe) : -1;
    if (status != 0 || output.empty()) {
      state.SkipWithError("PyTorch unavailable (Debian's python3-torch: ./setup.sh --tests)");
      return;
    }
    const nlohmann::json result = nlohmann::json::parse(output);
    state.SetIterationTime(result.at("median_step_s").get<double>());
    state.SetLabel("torch " + result.at("torch").get<std::string>());
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(kBatch * kSeq), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TorchTrainingStep)
    ->ArgsProduct({{2, 12}, {1, 2}})
    ->ArgNames({"layers", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);

}  // namespace
}  // namespace strata::executor
