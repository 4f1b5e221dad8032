// One training step (forward, backward, clipping, AdamW) on one GPU in bf16 mixed precision:
// Strata's CUDA backend, and the PyTorch installed beside it (torch_cuda_training_step.py) in
// eager mode and under torch.compile, on the same model, shapes and dtype, in the same run.
// Models: GPT-2 124M and a 1.3B GPT (24 layers, hidden 2048, 16 heads of 128), both with the
// vocabulary padded to 50304 (as nanoGPT and llm.c train GPT-2) and 16 × 1024 tokens a step.
// Counters: tokens/s, MFU (Megatron's model FLOPs over the dgx-h100 preset's bf16 peak), peak
// device memory. Each benchmark skips, saying why, without a GPU or without PyTorch (set
// STRATA_TORCH_PYTHON to the python that has it; default python3).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "strata/costmodels/kernel_time.h"
#include "strata/costmodels/model_flops.h"
#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/model/transformer.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

constexpr std::int64_t kBatch = 16;
constexpr std::int64_t kSeq = 1024;
constexpr std::int64_t kVocab = 50304;
constexpr int kWarmupSteps = 3;
constexpr int kSteps = 10;

// 0: GPT-2 124M; 1: the 1.3B GPT.
schemas::ModelConfig bench_model(std::int64_t which) {
  schemas::ModelConfig model = schemas::model_preset("gpt2-124m");
  model.vocab_size = kVocab;
  model.dropout = 0.0;
  if (which == 1) {
    model.name = "gpt-1.3b";
    model.num_layers = 24;
    model.hidden_size = 2048;
    model.ffn_hidden_size = 8192;
    model.num_attention_heads = 16;
    model.num_kv_heads = 16;
    model.head_dim = 128;
  }
  return model;
}

double peak_flops() {
  return costmodels::peak_tflops(schemas::cluster_preset("dgx-h100").gpu, schemas::Dtype::bf16) *
         1e12;
}

void set_counters(benchmark::State& state, const schemas::ModelConfig& model, double median_s,
                  double peak_bytes) {
  const double tokens = static_cast<double>(kBatch * kSeq);
  const double flops = costmodels::model_flops_per_token(model, kSeq).training() * tokens;
  state.counters["tokens_per_s"] = tokens / median_s;
  state.counters["mfu_percent"] = 100.0 * flops / median_s / peak_flops();
  state.counters["median_step_ms"] = median_s * 1e3;
  state.counters["peak_memory_gib"] = peak_bytes / (1u << 30);
}

void BM_StrataCudaTrainingStep(benchmark::State& state) {
  std::string why_not;
  if (!cuda_device_info(&why_not)) {
    state.SkipWithError(("no CUDA device: " + why_not).c_str());
    return;
  }
  const schemas::ModelConfig model = bench_model(state.range(0));
  std::vector<double> times;
  double peak_bytes = 0;
  {
    Transformer transformer(model, ScalarType::bfloat16, 1, Device::cuda);
    ParameterStore& parameters = transformer.parameters();
    OptimizerMoments moments = OptimizerMoments::zeros_like(parameters);
    std::mt19937 generator(0);
    std::vector<Tensor> inputs, targets;
    for (int i = 0; i < 4; ++i) {  // a few batches in turn: no step reuses the last one's data
      Tensor host_inputs = Tensor::zeros({kBatch, kSeq}, ScalarType::int32);
      Tensor host_targets = Tensor::zeros({kBatch, kSeq}, ScalarType::int32);
      for (std::int64_t t = 0; t < host_inputs.numel(); ++t) {
        host_inputs.data<std::int32_t>()[t] = static_cast<std::int32_t>(generator() % kVocab);
        host_targets.data<std::int32_t>()[t] = static_cast<std::int32_t>(generator() % kVocab);
      }
      inputs.push_back(host_inputs.to(Device::cuda));
      targets.push_back(host_targets.to(Device::cuda));
    }
    const AdamWConfig adamw;
    std::int64_t step = 0;
    auto train_step = [&] {
      parameters.zero_gradients();
      const std::size_t batch = static_cast<std::size_t>(step % 4);
      const double loss =
          transformer.forward_backward(inputs[batch], targets[batch], 1.0 / (kBatch * kSeq), {});
      benchmark::DoNotOptimize(loss);
      // Reads the gradient norm back: the step's last kernel has finished when it returns.
      optimizer_step(parameters, moments, 3e-4, step++, adamw, 1.0);
    };
    for (int i = 0; i < kWarmupSteps; ++i) train_step();
    reset_cuda_peak_memory();
    for (auto _ : state) {
      const auto start = std::chrono::steady_clock::now();
      train_step();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      state.SetIterationTime(seconds);
      times.push_back(seconds);
    }
    peak_bytes = static_cast<double>(cuda_memory_stats().peak_allocated_bytes);
  }
  release_cached_cuda_memory();  // PyTorch's process runs next
  std::sort(times.begin(), times.end());
  set_counters(state, model, times[times.size() / 2], peak_bytes);
  state.SetLabel(model.name + " bf16");
}
BENCHMARK(BM_StrataCudaTrainingStep)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("model")
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(kSteps);

void BM_TorchCudaTrainingStep(benchmark::State& state) {
  const schemas::ModelConfig model = bench_model(state.range(0));
  const char* mode = state.range(1) == 0 ? "eager" : "compile";
  const char* python = std::getenv("STRATA_TORCH_PYTHON");
  const std::string command =
      std::string(python != nullptr ? python : "python3") +
      " " STRATA_BENCH_DIR "/executor/torch_cuda_training_step.py --layers " +
      std::to_string(model.num_layers) + " --hidden " + std::to_string(model.hidden_size) +
      " --heads " + std::to_string(model.num_attention_heads) + " --vocab " +
      std::to_string(kVocab) + " --batch " + std::to_string(kBatch) + " --seq " +
      std::to_string(kSeq) + " --steps " + std::to_string(kSteps) + " --mode " + mode +
      " 2>/dev/null";
  nlohmann::json result;
  for (auto _ : state) {
    std::FILE* pipe = ::popen(command.c_str(), "r");
    std::string output;
    char buffer[1024];
    while (pipe != nullptr && std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
    const int status = pipe != nullptr ? ::pclose(pipe) : -1;
    if (status != 0 || output.empty()) {
      state.SkipWithError("PyTorch with CUDA unavailable (STRATA_TORCH_PYTHON names its python)");
      return;
    }
    result = nlohmann::json::parse(output);
    state.SetIterationTime(result.at("median_step_s").get<double>());
  }
  set_counters(state, model, result.at("median_step_s").get<double>(),
               result.at("peak_memory_bytes").get<double>());
  state.counters["warmup_s"] = result.at("warmup_s").get<double>();
  state.SetLabel(model.name + " torch " + result.at("torch").get<std::string>() + " " + mode);
}
BENCHMARK(BM_TorchCudaTrainingStep)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"model", "compile"})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);

}  // namespace
}  // namespace strata::executor
