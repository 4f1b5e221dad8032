// MlaConfig: multi-head latent attention (DeepSeek-V2/V3), the "mla" object of a model file.
// Keys and values pass through a low-rank latent (kv_lora_rank wide, the only per-token state
// inference caches) and queries through another (q_lora_rank); each head's query and key are a
// position-free part (qk_nope_head_dim) and a rotary part (qk_rope_head_dim) whose key is shared
// by all heads; values are v_head_dim wide. Counted by costmodels/ (parameters, FLOPs).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "strata/schemas/json_location.h"

namespace strata::schemas {

inline constexpr std::int64_t kMaxLatentRank = 1 << 16;

struct MlaConfig {
  std::int64_t q_lora_rank = 0;  // 0: queries projected straight from the hidden state
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;

  std::int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool operator==(const MlaConfig&) const = default;
};

MlaConfig parse_mla(const nlohmann::json& value, const JsonLocation& location);
nlohmann::json mla_to_json(const MlaConfig& mla);

}  // namespace strata::schemas
