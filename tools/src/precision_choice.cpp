#include "precision_choice.h"

#include <fmt/format.h>

namespace strata::tools {

PrecisionChoice training_precision(const std::optional<std::string>& requested,
                                   const schemas::ClusterConfig& cluster) {
  if (requested) {
    return {*schemas::value_of(*requested, schemas::kDtypeNames), {}};
  }
  const schemas::Dtype chosen = schemas::default_training_precision(cluster.gpu);
  if (chosen == schemas::Dtype::bf16) return {chosen, {}};
  return {chosen, fmt::format("note: the cluster's GPU ({}) has no bf16 peak; using {} "
                              "(--precision to choose)",
                              cluster.gpu.name, schemas::name_of(chosen, schemas::kDtypeNames))};
}

}  // namespace strata::tools
