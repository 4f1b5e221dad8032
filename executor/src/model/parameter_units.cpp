#include "strata/executor/model/parameter_units.h"

#include <charconv>

#include "strata/executor/check.h"

namespace strata::executor {

std::int64_t parameter_unit(const schemas::ModelConfig& model, std::string_view name) {
  if (name.starts_with("embedding.")) return 0;
  if (name.starts_with("final_norm.") || name.starts_with("lm_head.")) return model.num_layers + 1;
  constexpr std::string_view kLayers = "layers.";
  STRATA_CHECK(name.starts_with(kLayers), "parameter {} belongs to no unit", name);
  std::int64_t layer = -1;
  const char* first = name.data() + kLayers.size();
  std::from_chars(first, name.data() + name.size(), layer);
  STRATA_CHECK(layer >= 0 && layer < model.num_layers, "parameter {}: no such layer", name);
  return 1 + layer;
}

}  // namespace strata::executor
