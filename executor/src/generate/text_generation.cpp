#include "strata/executor/generate/text_generation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "strata/executor/check.h"
#include "strata/executor/random/counter_random.h"

namespace strata::executor {

std::int32_t draw_token(const float* logits, std::int64_t vocab, const GenerationOptions& options,
                        std::uint64_t position) {
  STRATA_CHECK(vocab > 0, "no vocabulary to draw from");
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; ties to the lower id, so the order (and the draw) is the same everywhere.
  const auto more_likely = [logits](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (options.temperature <= 0) {
    return *std::min_element(order.begin(), order.end(), more_likely);
  }
  const std::int64_t kept =
      options.top_k > 0 ? std::min<std::int64_t>(options.top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + kept, order.end(), more_likely);
  order.resize(static_cast<std::size_t>(kept));
  const double top = logits[order.front()];
  std::vector<double> weights(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    weights[i] = std::exp((logits[order[i]] - top) / options.temperature);
  }
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  // A uniform in (0, 1] per new token: the stream is "generation", the counter its position.
  const double target =
      random_uniform(RandomStream{options.seed, stream_of_name("generation")}, position) * total;
  double cumulative = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    cumulative += weights[i];
    if (target <= cumulative) return order[i];
  }
  return order.back();  // rounding left the target a hair above the sum
}

std::vector<std::int32_t> generate_tokens(Transformer& model,
                                          const std::vector<std::int32_t>& prompt,
                                          const GenerationOptions& options,
                                          const std::function<void(std::int32_t)>& on_token) {
  const schemas::ModelConfig& config = model.config();
  STRATA_CHECK(!prompt.empty(), "generation needs a prompt of at least one token");
  for (std::int32_t token : prompt) {
    STRATA_CHECK(token >= 0 && token < config.vocab_size,
                 "prompt token {} is outside the "
                 "vocabulary of {}",
                 token, config.vocab_size);
  }
  std::vector<std::int32_t> window = prompt;
  std::vector<std::int32_t> generated;
  for (std::int64_t n = 0; n < options.tokens; ++n) {
    // The most recent tokens the model's positions allow.
    const std::int64_t length =
        std::min<std::int64_t>(static_cast<std::int64_t>(window.size()), config.max_seq_length);
    Tensor inputs = Tensor::zeros({1, length}, ScalarType::int32);
    std::copy(window.end() - length, window.end(), inputs.data<std::int32_t>());
    const Tensor logits =
        model.forward_logits(model.device() == Device::cpu ? inputs : inputs.to(model.device()));
    const std::int64_t vocab = logits.size(1);
    const float* last = logits.data<float>() + (length - 1) * vocab;
    const std::int32_t token = draw_token(last, vocab, options, static_cast<std::uint64_t>(n));
    window.push_back(token);
    generated.push_back(token);
    if (on_token) on_token(token);
  }
  return generated;
}

}  // namespace strata::executor
