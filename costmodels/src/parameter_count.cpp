#include "strata/costmodels/parameter_count.h"

#include <algorithm>

namespace strata::costmodels {

using schemas::NormKind;
using schemas::PositionEmbedding;

namespace {

// LayerNorm has a scale and a bias per feature, RMSNorm only a scale.
std::int64_t norm_parameters(const schemas::ModelConfig& model, std::int64_t width) {
  return model.norm == NormKind::layernorm ? 2 * width : width;
}

std::int64_t up_matrices(const schemas::ModelConfig& model) {
  // SwiGLU has gate and up projections (h → width each); GELU and squared ReLU one up projection.
  return schemas::is_gated(model.mlp_activation) ? 2 : 1;
}

std::int64_t mlp_parameters(const schemas::ModelConfig& model, std::int64_t width) {
  std::int64_t count = mlp_matrix_parameters(model, width);
  if (model.mlp_bias) count += up_matrices(model) * width + model.hidden_size;
  return count;
}

}  // namespace

std::int64_t attention_matrix_parameters(const schemas::ModelConfig& model) {
  const std::int64_t h = model.hidden_size;
  const std::int64_t heads = model.num_attention_heads;
  if (model.mla) {
    const schemas::MlaConfig& mla = *model.mla;
    const std::int64_t q_width = heads * mla.qk_head_dim();
    const std::int64_t queries =
        mla.q_lora_rank > 0 ? h * mla.q_lora_rank + mla.q_lora_rank * q_width : h * q_width;
    // The kv latent and the rotary key shared by all heads come down in one projection.
    const std::int64_t keys_values =
        h * (mla.kv_lora_rank + mla.qk_rope_head_dim) +
        mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim);
    return queries + keys_values + heads * mla.v_head_dim * h;
  }
  const std::int64_t q_width = model.attention_width();
  return h * q_width + 2 * h * model.kv_width() + q_width * h;
}

std::int64_t mlp_matrix_parameters(const schemas::ModelConfig& model, std::int64_t width) {
  return (up_matrices(model) + 1) * model.hidden_size * width;
}

ParameterBreakdown count_parameters(const schemas::ModelConfig& model) {
  const std::int64_t h = model.hidden_size;
  const std::int64_t norm = norm_parameters(model, h);

  ParameterBreakdown count;
  count.num_layers = model.num_layers;
  count.token_embedding = model.vocab_size * h;
  count.position_embedding =
      model.position_embedding == PositionEmbedding::learned ? model.max_seq_length * h : 0;
  count.embedding_norm = model.embedding_norm ? norm : 0;

  count.attention_per_layer = attention_matrix_parameters(model);
  if (model.mla) {
    const schemas::MlaConfig& mla = *model.mla;
    std::int64_t replicated =
        h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + norm_parameters(model, mla.kv_lora_rank);
    if (mla.q_lora_rank > 0) {
      replicated += h * mla.q_lora_rank + norm_parameters(model, mla.q_lora_rank);
    }
    count.attention_per_layer +=
        norm_parameters(model, mla.kv_lora_rank) +
        (mla.q_lora_rank > 0 ? norm_parameters(model, mla.q_lora_rank) : 0);
    count.attention_replicated_per_layer = replicated;
  }
  if (model.qkv_bias) count.attention_per_layer += model.attention_width() + 2 * model.kv_width();
  if (model.attention_output_bias) count.attention_per_layer += h;
  if (model.attention_sinks) count.attention_per_layer += model.num_attention_heads;
  // One norm over head_dim each for queries and keys, shared by the heads.
  if (model.qk_norm) {
    count.attention_per_layer += 2 * norm_parameters(model, model.head_dim);
    count.attention_replicated_per_layer += 2 * norm_parameters(model, model.head_dim);
  }

  count.mlp_per_layer = mlp_parameters(model, model.ffn_hidden_size);
  if (model.moe) {
    const schemas::MoeConfig& moe = *model.moe;
    count.num_moe_layers = moe.num_moe_layers(model.num_layers);
    count.router_per_moe_layer = h * moe.num_experts;
    if (moe.router.expert_bias) count.router_per_moe_layer += moe.num_experts;
    if (moe.router.logit_bias) count.router_per_moe_layer += moe.num_experts;
    if (moe.shared_expert_gate) count.router_per_moe_layer += h;
    count.routed_expert = mlp_parameters(model, moe.expert_ffn_hidden_size);
    count.num_routed_experts = moe.num_experts;
    count.experts_per_token = moe.experts_per_token;
    count.shared_experts_per_moe_layer =
        moe.num_shared_experts * mlp_parameters(model, moe.shared_expert_ffn_hidden_size);
  }

  count.norms_per_layer = 2 * norm;
  count.final_norm = norm;
  count.lm_head = model.tied_embeddings ? 0 : model.vocab_size * h;
  if (model.mtp) {
    count.num_mtp_modules = model.mtp->num_modules;
    count.mtp_module_extra = 3 * norm + 2 * h * h;  // enorm, hnorm, final norm; eh_proj
    count.mtp_layer_moe = model.is_moe_layer(model.num_layers);
  }
  return count;
}

RankParameters rank_layer_parameters(const ParameterBreakdown& counts, std::int64_t tp,
                                     std::int64_t ep, std::int64_t etp, bool moe_layer) {
  const auto count = [](std::int64_t value) { return static_cast<double>(value); };
  const double split = static_cast<double>(tp);
  const double replicated = count(counts.attention_replicated_per_layer);
  RankParameters parameters;
  parameters.dense = (count(counts.attention_per_layer) - replicated) / split + replicated +
                     count(counts.norms_per_layer);
  if (!moe_layer) {
    parameters.dense += count(counts.mlp_per_layer) / split;
    return parameters;
  }
  parameters.dense +=
      count(counts.router_per_moe_layer) + count(counts.shared_experts_per_moe_layer) / split;
  parameters.expert = count(counts.routed_experts_per_moe_layer()) / static_cast<double>(ep * etp);
  return parameters;
}

double largest_layer_parameters_on_rank(const ParameterBreakdown& counts, std::int64_t tp,
                                        std::int64_t ep, std::int64_t etp) {
  double largest = rank_layer_parameters(counts, tp, 1, 1, false).total();
  if (counts.num_moe_layers > 0) {
    largest = std::max(largest, rank_layer_parameters(counts, tp, ep, etp, true).total());
  }
  return largest;
}

}  // namespace strata::costmodels
