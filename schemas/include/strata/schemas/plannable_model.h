// The model features the planner's search does not yet cover: a mixture-of-experts model's
// expert-parallel mesh (ep, etp) is not enumerated, so the planner refuses such models with this
// one rule rather than searching them as if ep were 1. Plans of them (written by hand or by
// validate-sim's rows) parse, simulate and carry the expert costs.
#pragma once

#include <optional>
#include <string>

#include "strata/schemas/model_config.h"

namespace strata::schemas {

struct ModelFeatureRefusal {
  std::string key;  // the model object's member ("moe")
  std::string rule;
};

std::optional<ModelFeatureRefusal> unplannable_model_feature(const ModelConfig& model);

}  // namespace strata::schemas
