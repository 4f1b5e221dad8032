#include "strata/profiler/compute_measurements.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <tuple>

#include "strata/executor/ops/causal_attention.h"
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

using executor::Tensor;
constexpr double kFloatBytes = 4;

// The models whose layer shapes a profile measures: the CPU backend's sizes, from a byte-level
// model to GPT-2 124M, in both architectures (gelu and swiglu MLPs).
constexpr const char* kShapeModels[] = {"gpt-tiny", "llama-tiny", "gpt2-124m"};

// Values like a model's (N(0, 0.02)): zeros would let a kernel skip work real data does not.
Tensor random_tensor(executor::Shape shape, std::uint64_t stream) {
  Tensor tensor = Tensor::zeros(std::move(shape), executor::ScalarType::float32);
  executor::fill_random_normal(executor::RandomStream{1234, stream}, 0, tensor.numel(), 0.02f,
                               tensor.data<float>());
  return tensor;
}

void check_interrupt(const ProfileSettings& settings) {
  if (settings.interrupted && settings.interrupted()) throw ProfileInterrupted{};
}

// Repeats per measurement: fewer for the longest ones, whose noise is smallest.
int repeats_for(const ProfileSettings& settings, double estimated_s) {
  return estimated_s > 0.5 ? std::max(2, settings.repeats - 2) : settings.repeats;
}

// Token counts of one micro-batch the profile covers (micro-batch × sequence).
std::vector<std::int64_t> token_counts(const ProfileSettings& settings) {
  return settings.quick ? std::vector<std::int64_t>{256, 1024}
                        : std::vector<std::int64_t>{128, 256, 512, 1024, 2048};
}

struct LinearShape {
  std::int64_t tokens = 0, in = 0, out = 0;
  auto key() const { return std::tie(tokens, in, out); }
  bool operator<(const LinearShape& other) const { return key() < other.key(); }
};

// Every linear of the shape models' layers and LM heads at tp 1 and 2 and each token count,
// below the profile's FLOP cap.
std::set<LinearShape> linear_shapes(const ProfileSettings& settings) {
  const double most_flops = settings.quick ? 1.2e10 : 9e10;
  std::set<LinearShape> shapes;
  for (const char* name : kShapeModels) {
    const schemas::ModelConfig model = schemas::model_preset(name);
    const bool swiglu = model.mlp_activation == schemas::MlpActivation::swiglu;
    for (const std::int64_t tp : {1, 2}) {
      const std::int64_t q = model.num_attention_heads * model.head_dim / tp;
      const std::int64_t kv = std::max<std::int64_t>(1, model.num_kv_heads / tp) * model.head_dim;
      const std::int64_t ffn = model.ffn_hidden_size / tp;
      const std::int64_t h = model.hidden_size;
      for (const std::int64_t tokens : token_counts(settings)) {
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

void measure_gemms(const ProfileSettings& settings, ComputeMeasurements& result) {
  const std::set<LinearShape> shapes = linear_shapes(settings);
  std::size_t done = 0;
  double rate = 2e10;  // FLOP/s guess until the first measurement
  for (const LinearShape& shape : shapes) {
    check_interrupt(settings);
    settings.report(
        fmt::format("GEMM {}/{}: tokens {} × in {} × out {} (forward, input and "
                    "weight gradients)",
                    ++done, shapes.size(), shape.tokens, shape.in, shape.out));
    const Tensor x = random_tensor({shape.tokens, shape.in}, 1);
    const Tensor weight = random_tensor({shape.out, shape.in}, 2);
    const Tensor dy = random_tensor({shape.tokens, shape.out}, 3);
    Tensor y = Tensor::zeros({shape.tokens, shape.out}, executor::ScalarType::float32);
    Tensor dx = Tensor::zeros({shape.tokens, shape.in}, executor::ScalarType::float32);
    Tensor dweight = Tensor::zeros({shape.out, shape.in}, executor::ScalarType::float32);
    const double t = static_cast<double>(shape.tokens), in = static_cast<double>(shape.in),
                 out = static_cast<double>(shape.out);
    const int repeats = repeats_for(settings, 2 * t * in * out / rate);
    // As the cost models name them: Y[m×n] = X[m×k]·W[k×n], dX = dY·Wᵀ, dW = Xᵀ·dY.
    GemmSample forward{t, out, in,
                       time_repeated([&] { linear_forward(x, weight, nullptr, y); }, repeats)};
    GemmSample input{t, in, out,
                     time_repeated([&] { linear_backward_input(dy, weight, dx); }, repeats)};
    GemmSample weight_gradient{
        in, out, t,
        time_repeated([&] { linear_backward_parameters(dy, x, dweight, nullptr); }, repeats)};
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

void measure_elementwise(const ProfileSettings& settings, ComputeMeasurements& result) {
  std::vector<ElementwiseShape> shapes;
  for (const char* name : kShapeModels) {
    const schemas::ModelConfig model = schemas::model_preset(name);
    for (const std::int64_t tokens : token_counts(settings)) {
      if (tokens < 256) continue;
      shapes.push_back({tokens, model.hidden_size, model.ffn_hidden_size, model.vocab_size,
                        model.mlp_activation == schemas::MlpActivation::swiglu});
    }
  }
  std::size_t done = 0;
  const int repeats = settings.repeats;
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
      const Tensor x = random_tensor({shape.tokens, shape.hidden}, 4);
      const Tensor weight = random_tensor({shape.hidden}, 5);
      const Tensor dy = random_tensor({shape.tokens, shape.hidden}, 6);
      Tensor y = Tensor::zeros_like(x), dx = Tensor::zeros_like(x);
      Tensor mean = Tensor::zeros({shape.tokens}, executor::ScalarType::float32);
      Tensor rstd = Tensor::zeros_like(mean);
      Tensor dweight = Tensor::zeros_like(weight), dbias = Tensor::zeros_like(weight);
      add_sample(result, "layer_norm forward", 2 * kFloatBytes * th, 0,
                 time_repeated(
                     [&] { executor::layer_norm_forward(x, weight, &weight, 1e-5, y, mean, rstd); },
                     repeats));
      add_sample(result, "layer_norm backward", 4 * kFloatBytes * th, 0,
                 time_repeated(
                     [&] {
                       executor::layer_norm_backward(dy, x, weight, mean, rstd, dx, dweight,
                                                     &dbias);
                     },
                     repeats));
      add_sample(result, "residual forward", 3 * kFloatBytes * th, 0,
                 time_repeated([&] { executor::residual_forward(x, dy, y); }, repeats));
      add_sample(result, "residual backward", 5 * kFloatBytes * th, 0,
                 time_repeated([&] { executor::residual_backward(dy, dx, y); }, repeats));
      // Dropout on a residual branch, as a layer runs it: a keep decision per element from the
      // counter-based generator, once in the forward and again in the backward (not stored).
      const executor::DropoutKey key{.seed = 1234,
                                     .step = 1,
                                     .site = 1,
                                     .first_token = 0,
                                     .first_feature = 0,
                                     .total_features = shape.hidden};
      result.elementwise.push_back(
          {"dropout forward", 2 * kFloatBytes * th, 0, th,
           time_repeated([&] { executor::dropout_forward(x, 0.1, key, y); }, repeats)});
      result.elementwise.push_back(
          {"dropout backward", 3 * kFloatBytes * th, 0, th,
           time_repeated([&] { executor::dropout_backward(dy, 0.1, key, dx); }, repeats)});
    }
    check_interrupt(settings);
    {
      const Tensor x = random_tensor({shape.tokens, shape.ffn}, 7);
      const Tensor up = random_tensor({shape.tokens, shape.ffn}, 8);
      const Tensor dy = random_tensor({shape.tokens, shape.ffn}, 9);
      Tensor y = Tensor::zeros_like(x), dx = Tensor::zeros_like(x), dup = Tensor::zeros_like(x);
      if (shape.swiglu) {
        add_sample(result, "swiglu forward", 3 * kFloatBytes * tf, tf,
                   time_repeated([&] { executor::swiglu_forward(x, up, y); }, repeats));
        add_sample(result, "swiglu backward", 7 * kFloatBytes * tf, tf,
                   time_repeated([&] { executor::swiglu_backward(dy, x, up, dx, dup); }, repeats));
      } else {
        add_sample(result, "gelu forward", 2 * kFloatBytes * tf, tf,
                   time_repeated([&] { executor::gelu_forward(x, y); }, repeats));
        add_sample(result, "gelu backward", 4 * kFloatBytes * tf, tf,
                   time_repeated([&] { executor::gelu_backward(dy, x, dx); }, repeats));
      }
    }
    check_interrupt(settings);
    {
      Tensor logits = random_tensor({shape.tokens, shape.vocab}, 10);
      Tensor targets = Tensor::zeros({shape.tokens}, executor::ScalarType::int32);
      for (std::int64_t i = 0; i < shape.tokens; ++i) {
        targets.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 7919) % shape.vocab);
      }
      Tensor losses = Tensor::zeros({shape.tokens}, executor::ScalarType::float32);
      Tensor lse = Tensor::zeros_like(losses);
      Tensor dlogits = Tensor::zeros_like(logits);
      add_sample(
          result, "cross_entropy forward", kFloatBytes * tv, tv,
          time_repeated([&] { executor::cross_entropy_forward(logits, targets, losses, lse); },
                        repeats));
      add_sample(result, "cross_entropy backward", 2 * kFloatBytes * tv, tv,
                 time_repeated(
                     [&] { executor::cross_entropy_backward(logits, targets, lse, 1.0, dlogits); },
                     repeats));
    }
  }
  // AdamW over a layer's worth of parameters and over a whole small model's.
  for (const std::int64_t parameters : {std::int64_t{1} << 20, std::int64_t{1} << 23}) {
    check_interrupt(settings);
    settings.report(fmt::format("AdamW over {} parameters", parameters));
    Tensor values = random_tensor({parameters}, 11);
    const Tensor gradient = random_tensor({parameters}, 12);
    Tensor first = Tensor::zeros_like(values), second = Tensor::zeros_like(values);
    std::int64_t step = 0;
    // Reads value, gradient and both moments; writes value and both moments.
    add_sample(
        result, "adamw", 7 * kFloatBytes * static_cast<double>(parameters), 0,
        time_repeated(
            [&] { executor::adamw_update(values, gradient, first, second, 1e-4, 0.1, ++step, {}); },
            repeats));
  }
}

void measure_attention(const ProfileSettings& settings, ComputeMeasurements& result) {
  std::vector<std::tuple<std::int64_t, std::int64_t>> shapes;  // (sequence, head dimension)
  for (const std::int64_t seq : settings.quick ? std::vector<std::int64_t>{256, 1024}
                                               : std::vector<std::int64_t>{128, 256, 512, 1024}) {
    for (const std::int64_t head_dim : {32, 64}) shapes.emplace_back(seq, head_dim);
  }
  std::size_t done = 0;
  for (const auto& [seq, head_dim] : shapes) {
    check_interrupt(settings);
    // About 1,024 tokens of 4 heads per call, as one micro-batch of the small models.
    const std::int64_t batch = std::max<std::int64_t>(1, 1024 / seq);
    const std::int64_t heads = 4;
    settings.report(fmt::format("attention {}/{}: batch {}, {} heads, sequence {}, head dim {}",
                                ++done, shapes.size(), batch, heads, seq, head_dim));
    const executor::AttentionShape shape{heads, heads, head_dim};
    const Tensor qkv = random_tensor({batch, seq, shape.qkv_width()}, 13);
    const Tensor dout = random_tensor({batch, seq, shape.output_width()}, 14);
    Tensor out = Tensor::zeros({batch, seq, shape.output_width()}, executor::ScalarType::float32);
    Tensor lse = Tensor::zeros({batch, heads, seq}, executor::ScalarType::float32);
    Tensor dqkv = Tensor::zeros_like(qkv);
    AttentionSample sample{static_cast<double>(batch),
                           static_cast<double>(heads),
                           static_cast<double>(seq),
                           static_cast<double>(head_dim),
                           {},
                           {}};
    sample.forward = time_repeated(
        [&] { executor::causal_attention_forward(qkv, shape, out, lse); }, settings.repeats);
    sample.backward = time_repeated(
        [&] { executor::causal_attention_backward(dout, qkv, out, lse, shape, dqkv); },
        settings.repeats);
    result.attention.push_back(sample);
  }
}

}  // namespace

ComputeMeasurements measure_compute(const ProfileSettings& settings) {
  ComputeMeasurements result;
  result.threads = omp_get_max_threads();
  {
    const Tensor a = random_tensor({1}, 15), b = random_tensor({1}, 16);
    Tensor y = Tensor::zeros({1}, executor::ScalarType::float32);
    result.smallest_op =
        time_repeated([&] { executor::residual_forward(a, b, y); }, settings.repeats);
  }
  measure_gemms(settings, result);
  measure_attention(settings, result);
  measure_elementwise(settings, result);
  return result;
}

std::vector<Timing*> timings_of(ComputeMeasurements& measured) {
  std::vector<Timing*> timings{&measured.smallest_op};
  for (GemmSample& sample : measured.gemms) timings.push_back(&sample.timing);
  for (ElementwiseSample& sample : measured.elementwise) timings.push_back(&sample.timing);
  for (AttentionSample& sample : measured.attention) {
    timings.push_back(&sample.forward);
    timings.push_back(&sample.backward);
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
