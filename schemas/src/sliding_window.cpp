#include "strata/schemas/sliding_window.h"

#include <algorithm>

#include "strata/schemas/model_config.h"
#include "strata/schemas/object_reader.h"

namespace strata::schemas {

SlidingWindow parse_sliding_window(const nlohmann::json& value, const JsonLocation& location) {
  const ObjectReader reader(value, location, {"size", "full_attention_interval"});
  SlidingWindow window;
  window.size = reader.integer("size", {1, kMaxSeqLength});
  // 1 would make every layer full: then the block says nothing and is left out.
  window.full_attention_interval =
      reader.optional_integer("full_attention_interval", {2, kMaxLayers}).value_or(0);
  return window;
}

nlohmann::json sliding_window_to_json(const SlidingWindow& window) {
  nlohmann::json document = {{"size", window.size}};
  if (window.full_attention_interval > 0) {
    document["full_attention_interval"] = window.full_attention_interval;
  }
  return document;
}

double mean_visible_keys(std::int64_t seq_length, std::int64_t size) {
  // Position i sees min(i + 1, size) keys: the causal triangle up to the window, then a band.
  const auto s = static_cast<double>(seq_length);
  const auto w = static_cast<double>(std::min(size, seq_length));
  return (w * (w + 1) / 2 + (s - w) * w) / s;
}

}  // namespace strata::schemas
