#include "precision_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/schemas/input_error.h"

namespace strata::tools {

schemas::Dtype precision_named(const std::string& name) {
  const std::optional<schemas::Dtype> dtype = schemas::value_of(name, schemas::kDtypeNames);
  if (!dtype) {
    throw schemas::InputError(
        "--precision", "",
        fmt::format("unknown precision {} ({})", name,
                    fmt::join(schemas::names_of(schemas::kDtypeNames), ", ")));
  }
  return *dtype;
}

PrecisionChoice training_precision(const std::optional<std::string>& requested,
                                   const schemas::ClusterConfig& cluster) {
  if (requested) {
    return {precision_named(*requested), {}};
  }
  const schemas::Dtype chosen = schemas::default_training_precision(cluster.gpu);
  if (chosen == schemas::Dtype::bf16) return {chosen, {}};
  return {chosen, fmt::format("note: the cluster's GPU ({}) has no bf16 peak; using {} "
                              "(--precision to choose)",
                              cluster.gpu.name, schemas::name_of(chosen, schemas::kDtypeNames))};
}

}  // namespace strata::tools
