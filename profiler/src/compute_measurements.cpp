#include "strata/profiler/compute_measurements.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <tuple>

#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/model/context_parallel.h"
#include "strata/executor/ops/attention_block.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/ops/convert.h"
#include "strata/executor/ops/cross_entropy.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/ops/gelu.h"
#include "strata/executor/ops/layer_norm.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/residual.h"
#include "strata/executor/ops/swiglu.h"
#include "strata/executor/optim/adamw.h"
#include "strata/executor/random/counter_random.h"
#include "strata/schemas/presets.h"

namespace strata::profiler {
namespace {

using executor::ScalarType;
using executor::Tensor;

// Where and in which types a profile's tensors live: the CPU backend's fp32, or the GPU's
// activations in the training precision beside its fp32 statistics, gradients and optimizer
// state (the types each op's check asks for).
class Backend {
 public:
  explicit Backend(const ProfileSettings& settings)
      : device_(settings.device), activation_type_(settings.activation_type) {}

  bool gpu() const { return device_ == executor::Device::cuda; }
  ScalarType activation_type() const { return activation_type_; }
  // Bytes of one activation element, as the memory-bound kernels move them.
  double element_bytes() const { return activation_type_ == ScalarType::bfloat16 ? 2 : 4; }

  // Values like a model's (N(0, 0.02)): zeros would let a kernel skip work real data does not.
  Tensor random(executor::Shape shape, std::uint64_t stream) const {
    return as_activation(random_float(std::move(shape), stream));
  }
  Tensor random_float(executor::Shape shape, std::uint64_t stream) const {
    if (!gpu()) {
      Tensor tensor = Tensor::zeros(std::move(shape), ScalarType::float32);
      executor::fill_random_normal(executor::RandomStream{1234, stream}, 0, tensor.numel(), 0.02f,
                                   tensor.data<float>());
      return tensor;
    }
    // A GPU's tensors reach billions of elements (a [16,384 × 128,256] loss): drawn on the host
    // they would take the profile's minutes. One block of 2^20 values is drawn and copied over
    // the tensor on the device, doubling what is filled each time; kernels see the same values.
    Tensor tensor = Tensor::zeros(std::move(shape), ScalarType::float32, device_);
    const std::int64_t total = tensor.numel();
    Tensor block =
        Tensor::zeros({std::min<std::int64_t>(total, kRandomBlock)}, ScalarType::float32);
    executor::fill_random_normal(executor::RandomStream{1234, stream}, 0, block.numel(), 0.02f,
                                 block.data<float>());
    auto* base = static_cast<float*>(tensor.raw());
    const auto slice = [&](std::int64_t first, std::int64_t count) {
      return Tensor::borrow(base + first, {count}, ScalarType::float32, device_);
    };
    slice(0, block.numel()).copy_from(block);
    for (std::int64_t filled = block.numel(); filled < total; filled *= 2) {
      const std::int64_t count = std::min(filled, total - filled);
      slice(filled, count).copy_from(slice(0, count));
    }
    return tensor;
  }
  Tensor zeros(executor::Shape shape) const {
    return Tensor::zeros(std::move(shape), activation_type_, device_);
  }
  Tensor zeros_float(executor::Shape shape) const {
    return Tensor::zeros(std::move(shape), ScalarType::float32, device_);
  }
  // Host values (token ids) where the ops read them.
  Tensor placed(Tensor host) const { return gpu() ? host.to(device_) : std::move(host); }

  // A GPU's kernels are timed by when the last one queued finished (time_repeated's `finish`).
  Timing time(const std::function<void()>& run, int repeats) const {
    return time_repeated(run, repeats, 2e-3,
                         gpu() ? std::function<void()>(executor::cuda_synchronize) : nullptr);
  }

 private:
  Tensor as_activation(Tensor values) const {
    if (activation_type_ == ScalarType::float32) return values;
    Tensor converted = Tensor::zeros(values.shape(), activation_type_, device_);
    executor::convert(values, converted);
    return converted;
  }

  static constexpr std::int64_t kRandomBlock = std::int64_t{1} << 20;

  executor::Device device_;
  ScalarType activation_type_;
};

// fp32 AdamW state: four bytes an element whatever the activations' type.
constexpr double kFloatBytes = 4;

// The models whose layer shapes a profile measures, from the backend's own scale: on the CPU a
// byte-level model to GPT-2 124M, on a GPU GPT-2 124M to an 8B model; both architectures (gelu
// and swiglu MLPs) either way.
std::vector<const char*> shape_models(const Backend& backend) {
  if (backend.gpu()) return {"gpt2-124m", "gpt3-1.7b", "llama3.1-8b"};
  return {"gpt-tiny", "llama-tiny", "gpt2-124m"};
}

void check_interrupt(const ProfileSettings& settings) {
  if (settings.interrupted && settings.interrupted()) throw ProfileInterrupted{};
}

// Repeats per measurement: fewer for the longest ones, whose noise is smallest.
int repeats_for(const ProfileSettings& settings, double estimated_s) {
  return estimated_s > 0.5 ? std::max(2, settings.repeats - 2) : settings.repeats;
}

// Token counts of one micro-batch the profile covers (micro-batch × sequence): a CPU rank's
// micro-batches, or a GPU's (up to 16 sequences of 1,024, a GPT-2 124M step's).
std::vector<std::int64_t> token_counts(const ProfileSettings& settings, const Backend& backend) {
  if (backend.gpu()) {
    return settings.quick ? std::vector<std::int64_t>{2048, 16384}
                          : std::vector<std::int64_t>{1024, 2048, 4096, 8192, 16384};
  }
  return settings.quick ? std::vector<std::int64_t>{256, 1024}
                        : std::vector<std::int64_t>{128, 256, 512, 1024, 2048};
}

struct LinearShape {
  std::int64_t tokens = 0, in = 0, out = 0;
  auto key() const { return std::tie(tokens, in, out); }
  bool operator<(const LinearShape& other) const { return key() < other.key(); }
};

// Every linear of the shape models' layers and LM heads at each tensor-parallel size the backend
// runs (1 and 2 on the CPU; 1 to 8 on a GPU, one node's) and each token count, below the
// profile's FLOP cap (a few tenths of a second on either backend).
std::set<LinearShape> linear_shapes(const ProfileSettings& settings, const Backend& backend) {
  const double most_flops =
      backend.gpu() ? (settings.quick ? 1e12 : 4e12) : (settings.quick ? 1.2e10 : 9e10);
  const std::vector<std::int64_t> tp_sizes =
      backend.gpu() ? std::vector<std::int64_t>{1, 2, 4, 8} : std::vector<std::int64_t>{1, 2};
  std::set<LinearShape> shapes;
  for (const char* name : shape_models(backend)) {
    const schemas::ModelConfig model = schemas::model_preset(name);
    const bool swiglu = schemas::is_gated(model.mlp_activation);
    for (const std::int64_t tp : tp_sizes) {
      const std::int64_t q = model.num_attention_heads * model.head_dim / tp;
      const std::int64_t kv = std::max<std::int64_t>(1, model.num_kv_heads / tp) * model.head_dim;
      const std::int64_t ffn = model.ffn_hidden_size / tp;
      const std::int64_t h = model.hidden_size;
      for (const std::int64_t tokens : token_counts(settings, backend)) {
        for (const LinearShape& shape :
             {LinearShape{tokens, h, q + 2 * kv}, LinearShape{tokens, q, h},
              LinearShape{tokens, h, (swiglu ? 2 : 1) * ffn}, LinearShape{tokens, ffn, h},
              LinearShape{tokens, h, (model.vocab_size + tp - 1) / tp}}) {
          if (2.0 * static_cast<double>(shape.tokens * shape.in * shape.out) <= most_flops) {
            shapes.insert(shape);
          }
        }
      }
    }
  }
  return shapes;
}

void measure_gemms(const ProfileSettings& settings, const Backend& backend,
                   ComputeMeasurements& result) {
  const std::set<LinearShape> shapes = linear_shapes(settings, backend);
  std::size_t done = 0;
  double rate = backend.gpu() ? 1e14 : 2e10;  // FLOP/s guess until the first measurement
  for (const LinearShape& shape : shapes) {
    check_interrupt(settings);
    settings.report(
        fmt::format("GEMM {}/{}: tokens {} × in {} × out {} (forward, input and "
                    "weight gradients)",
                    ++done, shapes.size(), shape.tokens, shape.in, shape.out));
    const Tensor x = backend.random({shape.tokens, shape.in}, 1);
    const Tensor weight = backend.random({shape.out, shape.in}, 2);
    const Tensor dy = backend.random({shape.tokens, shape.out}, 3);
    Tensor y = backend.zeros({shape.tokens, shape.out});
    Tensor dx = backend.zeros({shape.tokens, shape.in});
    // Parameter gradients accumulate in fp32 (mixed precision's master gradients).
    Tensor dweight = backend.zeros_float({shape.out, shape.in});
    const double t = static_cast<double>(shape.tokens), in = static_cast<double>(shape.in),
                 out = static_cast<double>(shape.out);
    const int repeats = repeats_for(settings, 2 * t * in * out / rate);
    // As the cost models name them: Y[m×n] = X[m×k]·W[k×n], dX = dY·Wᵀ, dW = Xᵀ·dY.
    GemmSample forward{t, out, in,
                       backend.time([&] { linear_forward(x, weight, nullptr, y); }, repeats)};
    GemmSample input{t, in, out,
                     backend.time([&] { linear_backward_input(dy, weight, dx); }, repeats)};
    GemmSample weight_gradient{
        in, out, t,
        backend.time([&] { linear_backward_parameters(dy, x, dweight, nullptr); }, repeats)};
    rate = forward.flops() / forward.timing.median_s;
    for (const GemmSample& sample : {forward, input, weight_gradient}) {
      result.gemms.push_back(sample);
    }
  }
}

// The sizes of the memory-bound kernels: per shape model and token count, [tokens, hidden],
// [tokens, ffn] and [tokens, vocab].
struct ElementwiseShape {
  std::int64_t tokens = 0, hidden = 0, ffn = 0, vocab = 0;
  bool swiglu = false;
};

void add_sample(ComputeMeasurements& result, std::string kernel, double bytes,
                double special_functions, const Timing& timing) {
  result.elementwise.push_back({std::move(kernel), bytes, special_functions, 0, timing});
}

// AdamW over a layer's worth of parameters and over a whole small model's (a GPU's: a whole
// GPT-2 124M and more).
void measure_adamw(const ProfileSettings& settings, const Backend& backend,
                   ComputeMeasurements& result) {
  const int repeats = settings.repeats;
  const std::vector<std::int64_t> parameter_counts =
      backend.gpu() ? std::vector<std::int64_t>{std::int64_t{1} << 24, std::int64_t{1} << 27}
                    : std::vector<std::int64_t>{std::int64_t{1} << 20, std::int64_t{1} << 23};
  for (const std::int64_t parameters : parameter_counts) {
    check_interrupt(settings);
    settings.report(fmt::format("AdamW over {} parameters", parameters));
    Tensor values = backend.random_float({parameters}, 11);
    const Tensor gradient = backend.random_float({parameters}, 12);
    Tensor first = backend.zeros_float({parameters}), second = backend.zeros_float({parameters});
    std::int64_t step = 0;
    // Reads value, gradient and both moments; writes value and both moments.
    add_sample(
        result, "adamw", 7 * kFloatBytes * static_cast<double>(parameters), 0,
        backend.time(
            [&] { executor::adamw_update(values, gradient, first, second, 1e-4, 0.1, ++step, {}); },
            repeats));
  }
}

void measure_elementwise(const ProfileSettings& settings, const Backend& backend,
                         ComputeMeasurements& result) {
  std::vector<ElementwiseShape> shapes;
  for (const char* name : shape_models(backend)) {
    const schemas::ModelConfig model = schemas::model_preset(name);
    for (const std::int64_t tokens : token_counts(settings, backend)) {
      if (tokens < 256) continue;
      shapes.push_back({tokens, model.hidden_size, model.ffn_hidden_size, model.vocab_size,
                        schemas::is_gated(model.mlp_activation)});
    }
  }
  std::size_t done = 0;
  const int repeats = settings.repeats;
  const double element = backend.element_bytes();
  for (const ElementwiseShape& shape : shapes) {
    check_interrupt(settings);
    settings.report(
        fmt::format("memory-bound kernels {}/{}: {} tokens, hidden {}, ffn {}, "
                    "vocabulary {}",
                    ++done, shapes.size(), shape.tokens, shape.hidden, shape.ffn, shape.vocab));
    const double rows = static_cast<double>(shape.tokens);
    const double th = rows * static_cast<double>(shape.hidden);
    const double tf = rows * static_cast<double>(shape.ffn);
    const double tv = rows * static_cast<double>(shape.vocab);
    {
      const Tensor x = backend.random({shape.tokens, shape.hidden}, 4);
      const Tensor weight = backend.random({shape.hidden}, 5);
      const Tensor dy = backend.random({shape.tokens, shape.hidden}, 6);
      Tensor y = backend.zeros({shape.tokens, shape.hidden});
      Tensor dx = backend.zeros({shape.tokens, shape.hidden});
      Tensor mean = backend.zeros_float({shape.tokens});
      Tensor rstd = backend.zeros_float({shape.tokens});
      Tensor dweight = backend.zeros_float({shape.hidden}),
             dbias = backend.zeros_float({shape.hidden});
      add_sample(result, "layer_norm forward", 2 * element * th, 0,
                 backend.time(
                     [&] { executor::layer_norm_forward(x, weight, &weight, 1e-5, y, mean, rstd); },
                     repeats));
      add_sample(result, "layer_norm backward", 4 * element * th, 0,
                 backend.time(
                     [&] {
                       executor::layer_norm_backward(dy, x, weight, mean, rstd, dx, dweight,
                                                     &dbias);
                     },
                     repeats));
      add_sample(result, "residual forward", 3 * element * th, 0,
                 backend.time([&] { executor::residual_forward(x, dy, y); }, repeats));
      add_sample(result, "residual backward", 5 * element * th, 0,
                 backend.time([&] { executor::residual_backward(dy, dx, y); }, repeats));
      // Dropout on a residual branch, as a layer runs it: a keep decision per element from the
      // counter-based generator, once in the forward and again in the backward (not stored).
      const executor::DropoutKey key{.seed = 1234,
                                     .step = 1,
                                     .site = 1,
                                     .first_token = 0,
                                     .first_feature = 0,
                                     .total_features = shape.hidden};
      result.elementwise.push_back(
          {"dropout forward", 2 * element * th, 0, th,
           backend.time([&] { executor::dropout_forward(x, 0.1, key, y); }, repeats)});
      result.elementwise.push_back(
          {"dropout backward", 3 * element * th, 0, th,
           backend.time([&] { executor::dropout_backward(dy, 0.1, key, dx); }, repeats)});
    }
    check_interrupt(settings);
    {
      const Tensor x = backend.random({shape.tokens, shape.ffn}, 7);
      const Tensor up = backend.random({shape.tokens, shape.ffn}, 8);
      const Tensor dy = backend.random({shape.tokens, shape.ffn}, 9);
      Tensor y = backend.zeros({shape.tokens, shape.ffn});
      Tensor dx = backend.zeros({shape.tokens, shape.ffn});
      Tensor dup = backend.zeros({shape.tokens, shape.ffn});
      if (shape.swiglu) {
        add_sample(result, "swiglu forward", 3 * element * tf, tf,
                   backend.time([&] { executor::swiglu_forward(x, up, y); }, repeats));
        add_sample(result, "swiglu backward", 7 * element * tf, tf,
                   backend.time([&] { executor::swiglu_backward(dy, x, up, dx, dup); }, repeats));
      } else {
        add_sample(result, "gelu forward", 2 * element * tf, tf,
                   backend.time([&] { executor::gelu_forward(x, y); }, repeats));
        add_sample(result, "gelu backward", 4 * element * tf, tf,
                   backend.time([&] { executor::gelu_backward(dy, x, dx); }, repeats));
      }
    }
    check_interrupt(settings);
    {
      const Tensor logits = backend.random({shape.tokens, shape.vocab}, 10);
      Tensor host_targets = Tensor::zeros({shape.tokens}, ScalarType::int32);
      for (std::int64_t i = 0; i < shape.tokens; ++i) {
        host_targets.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 7919) % shape.vocab);
      }
      const Tensor targets = backend.placed(std::move(host_targets));
      Tensor losses = backend.zeros_float({shape.tokens});
      Tensor lse = backend.zeros_float({shape.tokens});
      Tensor dlogits = backend.zeros({shape.tokens, shape.vocab});
      add_sample(
          result, "cross_entropy forward", element * tv, tv,
          backend.time([&] { executor::cross_entropy_forward(logits, targets, losses, lse); },
                       repeats));
      add_sample(result, "cross_entropy backward", 2 * element * tv, tv,
                 backend.time(
                     [&] { executor::cross_entropy_backward(logits, targets, lse, 1.0, dlogits); },
                     repeats));
    }
  }
  measure_adamw(settings, backend, result);
}

// What the first rank of a cp group of 2 computes of `whole`'s attention: its two chunks of each
// sequence block by block (ops/attention_block.h) against its own keys and the other rank's, as
// the ring and the all-gather variant do — without the communication, which the network
// measurements price. Many shorter products than one whole-sequence kernel.
AttentionSample time_context_parallel_attention(const ProfileSettings& settings,
                                                const Backend& backend,
                                                const AttentionSample& whole,
                                                const executor::AttentionShape& shape) {
  constexpr std::int64_t kRanks = 2;
  const auto batch = static_cast<std::int64_t>(whole.batch);
  const std::int64_t local_seq = static_cast<std::int64_t>(whole.seq) / kRanks;
  const Tensor qkv = backend.random({batch, local_seq, shape.qkv_width()}, 15);
  const Tensor dout = backend.random({batch, local_seq, shape.output_width()}, 16);
  Tensor out = backend.zeros({batch, local_seq, shape.output_width()});
  Tensor lse = backend.zeros({batch, shape.num_heads, local_seq});
  Tensor output_dot = backend.zeros({batch, shape.num_heads, local_seq});
  Tensor dqkv = backend.zeros({batch, local_seq, shape.qkv_width()});
  std::vector<Tensor> keys_values, keys_values_grad;
  for (std::int64_t source = 0; source < kRanks; ++source) {
    keys_values.push_back(backend.random({batch, local_seq, executor::kv_width(shape)},
                                         static_cast<std::uint64_t>(17 + source)));
    keys_values_grad.push_back(backend.zeros({batch, local_seq, executor::kv_width(shape)}));
  }
  const auto blocks_of = [&](std::int64_t source) {
    return executor::visible_attention_blocks(kRanks, 0, local_seq, source);
  };
  AttentionSample sample = whole;
  sample.cp = kRanks;
  sample.forward = backend.time(
      [&] {
        executor::attention_blocks_begin(out, lse);
        for (std::int64_t source = 0; source < kRanks; ++source) {
          for (const executor::AttentionBlock& block : blocks_of(source)) {
            executor::attention_block_forward(qkv, keys_values[static_cast<std::size_t>(source)],
                                              block, shape, out, lse);
          }
        }
      },
      settings.repeats);
  sample.backward = backend.time(
      [&] {
        executor::attention_output_dot(dout, out, shape, output_dot);
        for (std::int64_t source = 0; source < kRanks; ++source) {
          const auto index = static_cast<std::size_t>(source);
          for (const executor::AttentionBlock& block : blocks_of(source)) {
            executor::attention_block_backward(dout, qkv, keys_values[index], lse, output_dot,
                                               block, shape, dqkv, keys_values_grad[index]);
          }
        }
      },
      settings.repeats);
  return sample;
}

void measure_attention(const ProfileSettings& settings, const Backend& backend,
                       ComputeMeasurements& result) {
  // (sequence, head dimension): a CPU's small models, or a GPU's 64- and 128-wide heads.
  std::vector<std::int64_t> sequences;
  std::vector<std::int64_t> head_dims;
  if (backend.gpu()) {
    sequences = settings.quick ? std::vector<std::int64_t>{1024, 4096}
                               : std::vector<std::int64_t>{512, 1024, 2048, 4096};
    head_dims = {64, 128};
  } else {
    sequences = settings.quick ? std::vector<std::int64_t>{256, 1024}
                               : std::vector<std::int64_t>{128, 256, 512, 1024};
    head_dims = {32, 64};
  }
  std::vector<std::tuple<std::int64_t, std::int64_t>> shapes;
  for (const std::int64_t seq : sequences) {
    for (const std::int64_t head_dim : head_dims) shapes.emplace_back(seq, head_dim);
  }
  std::size_t done = 0;
  for (const auto& [seq, head_dim] : shapes) {
    check_interrupt(settings);
    // One micro-batch of the shape models: about 1,024 tokens of 4 heads on the CPU, 16,384
    // tokens of 12 heads on a GPU (GPT-2 124M's step).
    const std::int64_t batch = std::max<std::int64_t>(1, (backend.gpu() ? 16384 : 1024) / seq);
    const std::int64_t heads = backend.gpu() ? 12 : 4;
    settings.report(fmt::format("attention {}/{}: batch {}, {} heads, sequence {}, head dim {}",
                                ++done, shapes.size(), batch, heads, seq, head_dim));
    const executor::AttentionShape shape{heads, heads, head_dim};
    const Tensor qkv = backend.random({batch, seq, shape.qkv_width()}, 13);
    const Tensor dout = backend.random({batch, seq, shape.output_width()}, 14);
    Tensor out = backend.zeros({batch, seq, shape.output_width()});
    Tensor lse = backend.zeros_float({batch, heads, seq});
    Tensor dqkv = backend.zeros({batch, seq, shape.qkv_width()});
    AttentionSample sample{static_cast<double>(batch),
                           static_cast<double>(heads),
                           static_cast<double>(seq),
                           static_cast<double>(head_dim),
                           {},
                           {}};
    sample.forward = backend.time([&] { executor::causal_attention_forward(qkv, shape, out, lse); },
                                  settings.repeats);
    sample.backward =
        backend.time([&] { executor::causal_attention_backward(dout, qkv, out, lse, shape, dqkv); },
                     settings.repeats);
    result.attention.push_back(sample);
    if (backend.gpu()) continue;  // the CUDA backend runs no context parallelism
    result.context_parallel_attention.push_back(
        time_context_parallel_attention(settings, backend, sample, shape));
  }
}

}  // namespace

ComputeMeasurements measure_compute(const ProfileSettings& settings) {
  const Backend backend(settings);
  ComputeMeasurements result;
  result.threads = omp_get_max_threads();
  result.device = settings.device;
  result.precision = backend.activation_type() == ScalarType::bfloat16 ? schemas::Dtype::bf16
                                                                       : schemas::Dtype::fp32;
  {
    const Tensor a = backend.random({1}, 15), b = backend.random({1}, 16);
    Tensor y = backend.zeros({1});
    result.smallest_op =
        backend.time([&] { executor::residual_forward(a, b, y); }, settings.repeats);
  }
  measure_gemms(settings, backend, result);
  measure_attention(settings, backend, result);
  measure_elementwise(settings, backend, result);
  return result;
}

std::vector<Timing*> timings_of(ComputeMeasurements& measured) {
  std::vector<Timing*> timings{&measured.smallest_op};
  for (GemmSample& sample : measured.gemms) timings.push_back(&sample.timing);
  for (ElementwiseSample& sample : measured.elementwise) timings.push_back(&sample.timing);
  for (auto* samples : {&measured.attention, &measured.context_parallel_attention}) {
    for (AttentionSample& sample : *samples) {
      timings.push_back(&sample.forward);
      timings.push_back(&sample.backward);
    }
  }
  return timings;
}

double merge_repeated_sweep(ComputeMeasurements& start, ComputeMeasurements& end) {
  const std::vector<Timing*> first = timings_of(start);
  const std::vector<Timing*> second = timings_of(end);
  if (first.size() != second.size()) {
    throw std::logic_error("merge_repeated_sweep: the two sweeps measured different lists");
  }
  std::vector<double> changes;
  for (std::size_t i = 0; i < first.size(); ++i) {
    Timing& merged = *first[i];
    const Timing& later = *second[i];
    if (merged.median_s <= 0 || later.median_s <= 0) continue;
    changes.push_back(later.median_s / merged.median_s - 1);
    const double mean_s = 0.5 * (merged.median_s + later.median_s);
    const double half_difference = std::abs(later.median_s - merged.median_s) / (2 * mean_s);
    merged.spread = std::max({merged.spread, later.spread, half_difference});
    merged.median_s = mean_s;
  }
  if (changes.empty()) return 0;
  std::nth_element(changes.begin(), changes.begin() + changes.size() / 2, changes.end());
  return changes[changes.size() / 2];
}

}  // namespace strata::profiler
