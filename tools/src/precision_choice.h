// The training precision of `strata plan` and `strata simulate`: the one the user names, or the
// cluster GPU's default (bf16 where it has a bf16 peak). When the default is not bf16, `note` says
// why, for the command's report (stdout: stderr is for errors only), so a CPU profile's fp32
// plans are never a surprise.
#pragma once

#include <optional>
#include <string>

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/dtype.h"

namespace strata::tools {

struct PrecisionChoice {
  schemas::Dtype dtype = schemas::Dtype::bf16;
  std::string note;  // empty unless the default fell back from bf16
};

// The precision of a name ("bf16"); an unknown one throws schemas::InputError.
schemas::Dtype precision_named(const std::string& name);

PrecisionChoice training_precision(const std::optional<std::string>& requested,
                                   const schemas::ClusterConfig& cluster);

// The gradient dtype a user names for `precision` (--gradient-dtype; absent stays absent: the
// precision's default). A name that is not a dtype, or one the precision does not allow
// (schemas::allows_gradient_dtype), throws schemas::InputError naming the option.
std::optional<schemas::Dtype> gradient_dtype_named(const std::optional<std::string>& name,
                                                   schemas::Dtype precision);

}  // namespace strata::tools
