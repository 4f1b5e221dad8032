// The model features a plan can carry. A mixture-of-experts model needs the expert-parallel mesh
// (ep, etp) and the expert costs, and latent attention (mla) its own attention costs, before a
// plan of it means anything; until plans carry them, `strata describe` and `strata validate`
// count such models, and everything that builds a plan — parse_plan, the planner, simulate,
// train — refuses them with this one rule instead of pricing them as dense models.
#pragma once

#include <optional>
#include <string>

#include "strata/schemas/model_config.h"

namespace strata::schemas {

struct ModelFeatureRefusal {
  std::string key;  // the model object's member ("moe", "mla")
  std::string rule;
};

std::optional<ModelFeatureRefusal> unplannable_model_feature(const ModelConfig& model);

}  // namespace strata::schemas
