// Each CUDA op of one GPT layer step, timed on the GPU at the shapes of the training-step bench
// (16 × 1024 tokens of GPT-2 124M and of the 1.3B GPT, bf16), beside what the dgx-h100 cost model
// predicts for the same shapes (costmodels/kernel_time.h): GEMMs by the roofline and efficiency
// curve, attention by the flash-attention efficiency, the rest as bytes over achievable HBM
// bandwidth. Counters: measured_us, predicted_us, their ratio and the achieved TFLOP/s or GB/s.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/costmodels/attention_time.h"
#include "strata/costmodels/kernel_time.h"
#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/ops/convert.h"
#include "strata/executor/ops/cross_entropy.h"
#include "strata/executor/ops/embedding.h"
#include "strata/executor/ops/gelu.h"
#include "strata/executor/ops/layer_norm.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/residual.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

constexpr std::int64_t kTokens = 16 * 1024;
constexpr std::int64_t kSeq = 1024;
constexpr std::int64_t kVocab = 50304;
constexpr ScalarType kType = ScalarType::bfloat16;

struct LayerShape {
  const char* name;
  std::int64_t hidden, heads, head_dim;
  std::int64_t parameters;  // of the whole model, for the optimizer step
};
const LayerShape kShapes[] = {{"gpt2-124m", 768, 12, 64, 124'475'904},
                              {"gpt-1.3b", 2048, 16, 128, 1'313'722'368}};

const schemas::GpuProfile& h100() {
  static const schemas::GpuProfile gpu = schemas::cluster_preset("dgx-h100").gpu;
  return gpu;
}

// Random values (never zeros) in `type` on the GPU.
Tensor random_gpu(const Shape& shape, ScalarType type, double scale = 1.0) {
  Tensor host = Tensor::zeros(shape, ScalarType::float32);
  std::uint32_t state = 12345;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    host.data<float>()[i] =
        static_cast<float>(scale * ((static_cast<double>(state >> 8) / 16777216.0) * 2 - 1));
  }
  Tensor device = Tensor::zeros(shape, type, Device::cuda);
  if (type == ScalarType::float32) {
    device.copy_from(host);
  } else {
    const Tensor wide = host.to(Device::cuda);
    convert(wide, device);
  }
  return device;
}

// Median over repetitions of the op's time, each the mean of a run of calls between syncs.
double time_op(const std::function<void()>& op) {
  op();
  cuda_synchronize();
  std::vector<double> samples;
  for (int repetition = 0; repetition < 7; ++repetition) {
    const auto start = std::chrono::steady_clock::now();
    for (int call = 0; call < 5; ++call) op();
    cuda_synchronize();
    samples.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 5);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void report(benchmark::State& state, double measured_s, double predicted_s, double flops,
            double bytes) {
  state.counters["measured_us"] = measured_s * 1e6;
  state.counters["predicted_us"] = predicted_s * 1e6;
  state.counters["measured_over_predicted"] = measured_s / predicted_s;
  if (flops > 0) state.counters["tflops"] = flops / measured_s / 1e12;
  if (bytes > 0) state.counters["gb_per_s"] = bytes / measured_s / 1e9;
}

bool have_gpu(benchmark::State& state) {
  std::string why_not;
  if (cuda_device_info(&why_not)) return true;
  state.SkipWithError(("no CUDA device: " + why_not).c_str());
  return false;
}

// A projection of the layer: 0 qkv, 1 attention output, 2 fc (+bias+GELU epilogue), 3 MLP output,
// 4 LM head; forward (pass 0) or backward, input and weight gradients (pass 1).
void BM_Linear(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const LayerShape& shape = kShapes[state.range(0)];
  const std::int64_t h = shape.hidden;
  const std::int64_t ins[] = {h, h, h, 4 * h, h};
  const std::int64_t outs[] = {3 * h, h, 4 * h, h, kVocab};
  const std::int64_t which = state.range(1);
  const std::int64_t in = ins[which], out = outs[which];
  const bool backward = state.range(2) == 1;
  const Tensor x = random_gpu({kTokens, in}, kType);
  const Tensor weight = random_gpu({out, in}, kType, 0.02);
  const Tensor bias = random_gpu({out}, kType);
  const Tensor* bias_or_null = which == 4 ? nullptr : &bias;
  Tensor y = Tensor::zeros({kTokens, out}, kType, Device::cuda);
  Tensor pre = Tensor::zeros({kTokens, out}, kType, Device::cuda);
  Tensor dx = Tensor::zeros({kTokens, in}, kType, Device::cuda);
  Tensor dweight = Tensor::zeros({out, in}, ScalarType::float32, Device::cuda);
  Tensor dbias = Tensor::zeros({out}, ScalarType::float32, Device::cuda);
  double measured = 0;
  for (auto _ : state) {
    measured = time_op([&] {
      if (backward) {
        linear_backward(y, x, weight, &dx, dweight, which == 4 ? nullptr : &dbias);
      } else if (which == 2) {
        linear_gelu_forward(x, weight, bias_or_null, pre, y);
      } else {
        linear_forward(x, weight, bias_or_null, y);
      }
    });
    state.SetIterationTime(measured);
  }
  const double m = kTokens, n = out, k = in;
  const int gemms = backward ? 2 : 1;
  const double predicted = gemms * costmodels::gemm_time_s(h100(), schemas::Dtype::bf16, m, n, k);
  report(state, measured, predicted, gemms * costmodels::gemm_flops(m, n, k), 0);
  static const char* const kNames[] = {"qkv", "attention_output", "fc_gelu", "mlp_output",
                                       "lm_head"};
  state.SetLabel(std::string(shape.name) + " " + kNames[which] +
                 (backward ? " backward" : " forward"));
}
BENCHMARK(BM_Linear)
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4}, {0, 1}})
    ->ArgNames({"model", "gemm", "backward"})
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime()
    ->Iterations(1);

void BM_Attention(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const LayerShape& shape = kShapes[state.range(0)];
  const bool backward = state.range(1) == 1;
  const AttentionShape attention{shape.heads, shape.heads, shape.head_dim};
  const std::int64_t batch = kTokens / kSeq;
  const Tensor qkv = random_gpu({batch, kSeq, attention.qkv_width()}, kType);
  Tensor out = Tensor::zeros({batch, kSeq, attention.output_width()}, kType, Device::cuda);
  Tensor lse = Tensor::zeros({batch, shape.heads, kSeq}, ScalarType::float32, Device::cuda);
  causal_attention_forward(qkv, attention, out, lse);
  const Tensor dout = random_gpu(out.shape(), kType);
  Tensor dqkv = Tensor::zeros(qkv.shape(), kType, Device::cuda);
  double measured = 0;
  for (auto _ : state) {
    measured = time_op([&] {
      if (backward) {
        causal_attention_backward(dout, qkv, out, lse, attention, dqkv);
      } else {
        causal_attention_forward(qkv, attention, out, lse);
      }
    });
    state.SetIterationTime(measured);
  }
  const costmodels::AttentionShape attention_shape{.batch = static_cast<double>(batch),
                                                   .heads = static_cast<double>(shape.heads),
                                                   .query_tokens = kSeq,
                                                   .key_tokens = kSeq,
                                                   .head_dim = static_cast<double>(shape.head_dim)};
  const costmodels::AttentionFlops flops = costmodels::causal_attention_flops(attention_shape);
  const double work = backward ? flops.backward : flops.forward;
  const costmodels::AttentionTime predicted = costmodels::attention_time(
      h100(), schemas::Dtype::bf16, schemas::AttentionKernel::flash, attention_shape);
  report(state, measured, backward ? predicted.backward_s : predicted.forward_s, work, 0);
  state.SetLabel(std::string(shape.name) +
                 (backward ? " attention backward" : " attention forward"));
}
BENCHMARK(BM_Attention)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"model", "backward"})
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime()
    ->Iterations(1);

// The memory-bound ops: 0 LayerNorm forward, 1 LayerNorm backward, 2 GELU backward, 3 residual,
// 4 cross-entropy forward + backward over the vocabulary, 5 embedding forward + backward,
// 6 the optimizer step over every parameter.
void BM_MemoryBound(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const LayerShape& shape = kShapes[state.range(0)];
  const std::int64_t h = shape.hidden;
  const std::int64_t which = state.range(1);
  const double element = 2;  // bf16 bytes
  std::function<void()> op;
  double bytes = 0;
  Tensor a, b, c, d, e, f, g, dy, dbias;
  std::unique_ptr<ParameterStore> store;
  std::unique_ptr<OptimizerMoments> moments;
  switch (which) {
    case 0:
    case 1: {
      a = random_gpu({kTokens, h}, kType);
      b = random_gpu({h}, kType);
      c = random_gpu({h}, kType);
      d = Tensor::zeros({kTokens, h}, kType, Device::cuda);
      e = Tensor::zeros({kTokens}, ScalarType::float32, Device::cuda);
      f = Tensor::zeros({kTokens}, ScalarType::float32, Device::cuda);
      layer_norm_forward(a, b, &c, 1e-5, d, e, f);
      g = Tensor::zeros({h}, ScalarType::float32, Device::cuda);
      dbias = Tensor::zeros({h}, ScalarType::float32, Device::cuda);
      dy = random_gpu({kTokens, h}, kType);
      if (which == 0) {
        op = [&] { layer_norm_forward(a, b, &c, 1e-5, d, e, f); };
        bytes = 2 * kTokens * h * element;
      } else {
        op = [&] { layer_norm_backward(dy, a, b, e, f, d, g, &dbias); };
        bytes = 5 * kTokens * h * element;  // dy, x and dx once, dy and x again for the gains
      }
      break;
    }
    case 2:
      a = random_gpu({kTokens, 4 * h}, kType);
      b = random_gpu({kTokens, 4 * h}, kType);
      c = Tensor::zeros({kTokens, 4 * h}, kType, Device::cuda);
      op = [&] { gelu_backward(a, b, c); };
      bytes = 4 * kTokens * 4 * h * element;
      break;
    case 3:
      a = random_gpu({kTokens, h}, kType);
      b = random_gpu({kTokens, h}, kType);
      c = Tensor::zeros({kTokens, h}, kType, Device::cuda);
      op = [&] { residual_forward(a, b, c); };
      bytes = 3 * kTokens * h * element;
      break;
    case 4: {
      a = random_gpu({kTokens, kVocab}, kType, 4.0);
      Tensor targets = Tensor::zeros({kTokens}, ScalarType::int32);
      for (std::int64_t n = 0; n < kTokens; ++n) {
        targets.data<std::int32_t>()[n] = static_cast<std::int32_t>((n * 7919) % kVocab);
      }
      b = targets.to(Device::cuda);
      c = Tensor::zeros({kTokens}, ScalarType::float32, Device::cuda);
      d = Tensor::zeros({kTokens}, ScalarType::float32, Device::cuda);
      e = Tensor::zeros({kTokens, kVocab}, kType, Device::cuda);
      op = [&] {
        cross_entropy_forward(a, b, c, d);
        cross_entropy_backward(a, b, d, 1.0 / kTokens, e);
      };
      bytes = 3.0 * kTokens * kVocab * element;
      break;
    }
    case 5: {
      Tensor ids = Tensor::zeros({kTokens}, ScalarType::int32);
      for (std::int64_t n = 0; n < kTokens; ++n) {
        ids.data<std::int32_t>()[n] = static_cast<std::int32_t>((n * 7919) % kVocab);
      }
      a = ids.to(Device::cuda);
      b = random_gpu({kVocab, h}, kType);
      c = Tensor::zeros({kTokens, h}, kType, Device::cuda);
      d = Tensor::zeros({kVocab, h}, ScalarType::float32, Device::cuda);
      op = [&] {
        embedding_forward(a, b, c);
        embedding_backward(a, c, d);
      };
      bytes = kTokens * h * (2 * element + 2 * 4.0);  // gather, then read and add float rows
      break;
    }
    case 6: {
      store = std::make_unique<ParameterStore>(
          std::vector<ParameterSpec>{{"flat", {shape.parameters}, {InitKind::zeros, 0}, true}},
          ScalarType::float32, Device::cuda, kType);
      moments = std::make_unique<OptimizerMoments>(OptimizerMoments::zeros_like(*store));
      store->gradients().copy_from(random_gpu({shape.parameters}, ScalarType::float32, 1e-3));
      op = [&] { optimizer_step(*store, *moments, 3e-4, 0, AdamWConfig{}, 1.0); };
      bytes = shape.parameters *
              (4.0 /*norm*/ + 16 /*read p g m v*/ + 12 /*write p m v*/ + 2 /*bf16 copy*/);
      break;
    }
  }
  double measured = 0;
  for (auto _ : state) {
    measured = time_op(op);
    state.SetIterationTime(measured);
  }
  report(state, measured, costmodels::memory_bound_time_s(h100(), bytes), 0, bytes);
  static const char* const kNames[] = {"layernorm forward",
                                       "layernorm backward",
                                       "gelu backward",
                                       "residual add",
                                       "cross-entropy forward+backward",
                                       "embedding forward+backward",
                                       "optimizer step"};
  state.SetLabel(std::string(shape.name) + " " + kNames[which]);
}
BENCHMARK(BM_MemoryBound)
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4, 5, 6}})
    ->ArgNames({"model", "op"})
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime()
    ->Iterations(1);

}  // namespace
}  // namespace strata::executor
