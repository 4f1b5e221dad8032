#include "strata/costmodels/model_flops.h"

#include "strata/costmodels/parameter_count.h"

namespace strata::costmodels {

FlopsPerToken model_flops_per_token(const schemas::ModelConfig& model, std::int64_t seq_length) {
  const schemas::ModelConfig& m = model;
  const std::int64_t up_matrices = m.mlp_activation == schemas::MlpActivation::swiglu ? 2 : 1;
  const double layer_matrix_parameters =
      static_cast<double>(m.hidden_size) * (2.0 * m.attention_width() + 2.0 * m.kv_width()) +
      static_cast<double>(up_matrices + 1) * m.hidden_size * m.ffn_hidden_size;
  const double lm_head_parameters = static_cast<double>(m.vocab_size) * m.hidden_size;
  // Per token and layer, QKᵀ and AV each multiply a width-wide vector with seq_length rows.
  const double attention_per_layer =
      2.0 * 2.0 * static_cast<double>(seq_length) * m.attention_width();

  FlopsPerToken flops;
  flops.forward = m.num_layers * (2.0 * layer_matrix_parameters + attention_per_layer) +
                  2.0 * lm_head_parameters;
  flops.backward = 2.0 * flops.forward;
  return flops;
}

}  // namespace strata::costmodels
