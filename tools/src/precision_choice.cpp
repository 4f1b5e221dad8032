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

std::optional<schemas::Dtype> gradient_dtype_named(const std::optional<std::string>& name,
                                                   schemas::Dtype precision) {
  if (!name) return std::nullopt;
  const std::optional<schemas::Dtype> dtype = schemas::value_of(*name, schemas::kDtypeNames);
  if (!dtype || !schemas::allows_gradient_dtype(precision, *dtype)) {
    const schemas::Dtype usual = schemas::default_gradient_dtype(precision);
    const bool bf16_allowed = schemas::allows_gradient_dtype(precision, schemas::Dtype::bf16);
    const bool fp32_allowed = schemas::allows_gradient_dtype(precision, schemas::Dtype::fp32);
    throw schemas::InputError(
        "--gradient-dtype", "",
        fmt::format("{} with precision {}: gradients are {}{}", *name,
                    schemas::name_of(precision, schemas::kDtypeNames),
                    schemas::name_of(usual, schemas::kDtypeNames),
                    bf16_allowed && usual != schemas::Dtype::bf16   ? " (the default) or bf16"
                    : fp32_allowed && usual != schemas::Dtype::fp32 ? " (the default) or fp32"
                                                                    : ""));
  }
  return dtype;
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
