#include "strata/executor/ops/dropout.h"

#include "cuda/dropout.cuh"
#include "strata/executor/ops/dispatch.h"
#include "strata/executor/random/counter_random.h"

namespace strata::executor {
namespace {

// The stream packs the step (high 40 bits) and the site (low 24 bits).
RandomStream stream_of(const DropoutKey& key) {
  return RandomStream{key.seed, (key.step << 24) | (key.site & 0xFFFFFFu)};
}

template <class T>
void apply_mask(const T* in, double probability, const DropoutKey& key, std::int64_t features,
                std::int64_t rows, T* out, bool accumulate) {
  const RandomStream stream = stream_of(key);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - probability));
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::uint64_t token = static_cast<std::uint64_t>(key.first_token + row);
    for (std::int64_t column = 0; column < features; ++column) {
      const std::uint64_t index = token * static_cast<std::uint64_t>(key.total_features) +
                                  static_cast<std::uint64_t>(key.first_feature + column);
      const bool keep = random_uniform(stream, index) > probability;
      const T value = keep ? in[row * features + column] * keep_scale : T(0);
      if (accumulate) {
        out[row * features + column] += value;
      } else {
        out[row * features + column] = value;
      }
    }
  }
}

void run_dropout(const char* op, const Tensor& in, double probability, const DropoutKey& key,
                 Tensor& out, bool accumulate) {
  check_same_numel(op, in, out);
  STRATA_CHECK(probability >= 0 && probability < 1, "{}: probability {}", op, probability);
  const std::int64_t features = in.size(-1);
  STRATA_CHECK(key.total_features >= key.first_feature + features, "{}: features {} + {} > {}", op,
               key.first_feature, features, key.total_features);
  if (on_cuda(op, {&in, &out})) {
    const ScalarType type = check_cuda_types(op, {&in, &out}, {});
    if constexpr (kCudaBackendBuilt) {
      const RandomStream stream = stream_of(key);
      cuda::launch_dropout(in.raw(), out.raw(), in.numel() / features, features,
                           cuda::DropoutLaunch{stream.seed, stream.stream, key.first_token,
                                               key.first_feature, key.total_features, probability},
                           accumulate, type);
    }
    return;
  }
  check_cpu_same_type(op, {&in, &out});
  dispatch_floating(in.scalar_type(), op, [&]<class T>() {
    apply_mask(in.data<T>(), probability, key, features, in.numel() / features, out.data<T>(),
               accumulate);
  });
}

}  // namespace

bool dropout_keeps(const DropoutKey& key, double probability, std::int64_t token,
                   std::int64_t feature) {
  const std::uint64_t index =
      static_cast<std::uint64_t>(token) * static_cast<std::uint64_t>(key.total_features) +
      static_cast<std::uint64_t>(feature);
  return random_uniform(stream_of(key), index) > probability;
}

void dropout_forward(const Tensor& x, double probability, const DropoutKey& key, Tensor& y) {
  run_dropout("dropout_forward", x, probability, key, y, false);
}

void dropout_backward(const Tensor& dy, double probability, const DropoutKey& key, Tensor& dx) {
  run_dropout("dropout_backward", dy, probability, key, dx, true);
}

}  // namespace strata::executor
