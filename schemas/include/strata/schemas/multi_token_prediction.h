// MultiTokenPrediction: DeepSeek-V3's multi-token prediction (the "mtp" object of a model file) —
// D sequential modules after the main model, module k predicting the token k + 1 places ahead.
// Module k (from 1) normalises the previous module's output (the main model's, after its final
// norm, for k = 1) and the embedding of the token k places ahead, projects their concatenation
// [embedding; hidden] (2h → h), runs one transformer layer of the kind of the model's last layer,
// normalises, and scores the vocabulary with the main model's output head; the embedding and the
// head are the main model's (shared, not copies). Its loss, averaged over the positions that have
// a token k + 1 ahead, joins the main loss with weight loss_weight / D (Megatron-Core's
// mtp_loss_scaling_factor / mtp_num_layers). Megatron places every module on the last pipeline
// stage. Counted by costmodels/, built by the executor, read from Hugging Face's
// num_nextn_predict_layers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "strata/schemas/json_location.h"

namespace strata::schemas {

inline constexpr std::int64_t kMaxMtpModules = 16;

struct MultiTokenPrediction {
  std::int64_t num_modules = 1;  // D
  // λ: the weight of the modules' mean loss beside the main loss (DeepSeek-V3: 0.3 for its first
  // 10T tokens, then 0.1; Megatron-Core's default 0.1).
  double loss_weight = 0.1;
  bool operator==(const MultiTokenPrediction&) const = default;
};

MultiTokenPrediction parse_multi_token_prediction(const nlohmann::json& value,
                                                  const JsonLocation& location);
nlohmann::json multi_token_prediction_to_json(const MultiTokenPrediction& mtp);

}  // namespace strata::schemas
