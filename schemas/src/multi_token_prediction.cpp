#include "strata/schemas/multi_token_prediction.h"

#include "strata/schemas/object_reader.h"

namespace strata::schemas {

MultiTokenPrediction parse_multi_token_prediction(const nlohmann::json& value,
                                                  const JsonLocation& location) {
  const ObjectReader reader(value, location, {"num_modules", "loss_weight"});
  MultiTokenPrediction mtp;
  mtp.num_modules = reader.integer("num_modules", {1, kMaxMtpModules});
  mtp.loss_weight =
      reader
          .optional_number("loss_weight", {.minimum = 0, .maximum = 1e3, .minimum_exclusive = true})
          .value_or(mtp.loss_weight);
  return mtp;
}

nlohmann::json multi_token_prediction_to_json(const MultiTokenPrediction& mtp) {
  return {{"num_modules", mtp.num_modules}, {"loss_weight", mtp.loss_weight}};
}

}  // namespace strata::schemas
