#include "strata/schemas/plannable_model.h"

namespace strata::schemas {

std::optional<ModelFeatureRefusal> unplannable_model_feature(const ModelConfig& model) {
  if (model.moe) {
    return ModelFeatureRefusal{
        "moe",
        "plans do not yet carry expert parallelism (ep, etp) or expert costs; strata describe "
        "counts a mixture-of-experts model's total and active parameters and FLOPs"};
  }
  if (model.mla) {
    return ModelFeatureRefusal{
        "mla",
        "plans do not yet price latent attention; strata describe counts its parameters and "
        "FLOPs"};
  }
  return std::nullopt;
}

}  // namespace strata::schemas
