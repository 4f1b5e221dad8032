// The training precision of `strata plan` and `strata simulate`: the one the user names, or the
// cluster GPU's default (bf16 where it has a bf16 peak), with a note on stderr when the default is
// not bf16 so a CPU profile's fp32 plans are never a surprise.
#pragma once

#include <optional>
#include <string>

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/dtype.h"

namespace strata::tools {

schemas::Dtype training_precision(const std::optional<std::string>& requested,
                                  const schemas::ClusterConfig& cluster);

}  // namespace strata::tools
