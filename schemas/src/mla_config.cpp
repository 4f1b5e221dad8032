#include "strata/schemas/mla_config.h"

#include <fmt/format.h>

#include "strata/schemas/object_reader.h"

namespace strata::schemas {

MlaConfig parse_mla(const nlohmann::json& value, const JsonLocation& location) {
  const ObjectReader reader(
      value, location,
      {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
  MlaConfig mla;
  mla.q_lora_rank = reader.optional_integer("q_lora_rank", {1, kMaxLatentRank}).value_or(0);
  mla.kv_lora_rank = reader.integer("kv_lora_rank", {1, kMaxLatentRank});
  mla.qk_nope_head_dim = reader.integer("qk_nope_head_dim", {0, 4096});
  // RoPE rotates pairs of features.
  mla.qk_rope_head_dim = reader.integer("qk_rope_head_dim", {2, 4096});
  if (mla.qk_rope_head_dim % 2 != 0) {
    reader.at("qk_rope_head_dim")
        .fail(fmt::format("{} must be even for rotary position embedding", mla.qk_rope_head_dim));
  }
  mla.v_head_dim = reader.integer("v_head_dim", {1, 4096});
  return mla;
}

nlohmann::json mla_to_json(const MlaConfig& mla) {
  nlohmann::json document = {{"kv_lora_rank", mla.kv_lora_rank},
                             {"qk_nope_head_dim", mla.qk_nope_head_dim},
                             {"qk_rope_head_dim", mla.qk_rope_head_dim},
                             {"v_head_dim", mla.v_head_dim}};
  if (mla.q_lora_rank > 0) document["q_lora_rank"] = mla.q_lora_rank;
  return document;
}

}  // namespace strata::schemas
