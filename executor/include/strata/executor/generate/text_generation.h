// Text generation from a trained model, as llm.c does it after training: each new token is drawn
// from the next-token distribution that a forward of the whole window so far gives (no key/value
// cache: the window is recomputed, up to the model's max_seq_length most recent tokens).
//
// Drawing: logits / temperature, cut to the top_k largest when top_k > 0, softmax, then the
// inverse CDF at a counter-based uniform keyed by (seed, token position) — the same seed gives
// the same text on every machine and thread count; temperature 0 takes the most likely token.
// Used by `strata sample`.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "strata/executor/model/transformer.h"

namespace strata::executor {

struct GenerationOptions {
  std::int64_t tokens = 64;  // new tokens to draw
  double temperature = 1.0;  // 0: greedy
  std::int64_t top_k = 0;    // 0: the whole vocabulary
  std::uint64_t seed = 1234;
};

// The token drawn from `logits` (float32, one row of vocab entries) for new token `position`.
std::int32_t draw_token(const float* logits, std::int64_t vocab, const GenerationOptions& options,
                        std::uint64_t position);

// Continues `prompt` (at least one token, each below the vocabulary) by options.tokens tokens,
// calling on_token with each as it is drawn; returns the new tokens. `model` is held whole on
// one rank.
std::vector<std::int32_t> generate_tokens(Transformer& model,
                                          const std::vector<std::int32_t>& prompt,
                                          const GenerationOptions& options,
                                          const std::function<void(std::int32_t)>& on_token = {});

}  // namespace strata::executor
