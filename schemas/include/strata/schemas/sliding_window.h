// SlidingWindow: sliding-window attention (the "sliding_window" object of a model file) — which
// layers let a query see only the most recent keys, and how many. Mistral windows every layer;
// GPT-OSS alternates 128-token windows with full attention, Gemma 3 keeps one full layer in six.
// Counted by costmodels/ (attention FLOPs and the flash kernel's skipped tiles), built by the
// executor (its attention ops and context parallelism's block list), read by the HF importer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "strata/schemas/json_location.h"

namespace strata::schemas {

struct SlidingWindow {
  // Keys a query sees on a windowed layer: itself and the size − 1 positions before it
  // (transformers' `sliding_window`; flash-attention's window (size − 1, 0)).
  std::int64_t size = 0;
  // 0: every layer is windowed. n ≥ 2: layer i (from 0) attends fully iff (i + 1) is a multiple
  // of n, the others are windowed (GPT-OSS: 2, Gemma 3: 6).
  std::int64_t full_attention_interval = 0;

  bool is_windowed(std::int64_t layer) const {
    return full_attention_interval == 0 || (layer + 1) % full_attention_interval != 0;
  }
  std::int64_t windowed_layers(std::int64_t num_layers) const {
    return full_attention_interval == 0 ? num_layers
                                        : num_layers - num_layers / full_attention_interval;
  }
  bool operator==(const SlidingWindow&) const = default;
};

SlidingWindow parse_sliding_window(const nlohmann::json& value, const JsonLocation& location);
nlohmann::json sliding_window_to_json(const SlidingWindow& window);

// Keys a query at a sequence position sees on average over a causal sequence of seq_length
// tokens under a window of `size` (size ≥ seq_length: the causal (seq_length + 1) / 2).
double mean_visible_keys(std::int64_t seq_length, std::int64_t size);

}  // namespace strata::schemas
