#include "strata/schemas/plannable_model.h"

namespace strata::schemas {

std::optional<ModelFeatureRefusal> unplannable_model_feature(const ModelConfig& model) {
  if (model.moe) {
    return ModelFeatureRefusal{
        "moe",
        "the planner does not yet search expert parallelism (ep, etp); write a plan with the "
        "mesh's ep and etp and price it with strata simulate"};
  }
  return std::nullopt;
}

}  // namespace strata::schemas
