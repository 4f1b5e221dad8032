#include "strata/costmodels/parameter_count.h"

namespace strata::costmodels {

using schemas::MlpActivation;
using schemas::NormKind;
using schemas::PositionEmbedding;

ParameterBreakdown count_parameters(const schemas::ModelConfig& model) {
  const std::int64_t h = model.hidden_size;
  // LayerNorm has a scale and a bias per feature, RMSNorm only a scale.
  const std::int64_t norm = model.norm == NormKind::layernorm ? 2 * h : h;
  const std::int64_t q_width = model.attention_width();
  const std::int64_t kv_width = model.kv_width();

  ParameterBreakdown count;
  count.num_layers = model.num_layers;
  count.token_embedding = model.vocab_size * h;
  count.position_embedding =
      model.position_embedding == PositionEmbedding::learned ? model.max_seq_length * h : 0;
  count.embedding_norm = model.embedding_norm ? norm : 0;

  count.attention_per_layer = h * q_width + 2 * h * kv_width + q_width * h;
  if (model.qkv_bias) count.attention_per_layer += q_width + 2 * kv_width;
  if (model.attention_output_bias) count.attention_per_layer += h;

  // SwiGLU has gate and up projections (h → ffn each) and a down projection; GELU and squared
  // ReLU one up and one down projection.
  const std::int64_t up_matrices = model.mlp_activation == MlpActivation::swiglu ? 2 : 1;
  count.mlp_per_layer = (up_matrices + 1) * h * model.ffn_hidden_size;
  if (model.mlp_bias) count.mlp_per_layer += up_matrices * model.ffn_hidden_size + h;

  count.norms_per_layer = 2 * norm;
  count.final_norm = norm;
  count.lm_head = model.tied_embeddings ? 0 : model.vocab_size * h;
  return count;
}

}  // namespace strata::costmodels
