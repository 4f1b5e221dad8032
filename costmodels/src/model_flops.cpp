#include "strata/costmodels/model_flops.h"

#include "strata/costmodels/parameter_count.h"

namespace strata::costmodels {

FlopsPerToken model_flops_per_token(const schemas::ModelConfig& model, std::int64_t seq_length) {
  const schemas::ModelConfig& m = model;
  const auto attention_matrices = static_cast<double>(attention_matrix_parameters(m));
  const double dense_layer_matrices =
      attention_matrices + static_cast<double>(mlp_matrix_parameters(m, m.ffn_hidden_size));
  // A MoE layer multiplies a token by the router's gate and the experts it visits: its top k
  // routed experts and every shared expert (and Qwen2-MoE's hidden → 1 shared-expert gate).
  double moe_layer_matrices = 0;
  std::int64_t moe_layers = 0;
  if (m.moe) {
    const schemas::MoeConfig& moe = *m.moe;
    moe_layers = moe.num_moe_layers(m.num_layers);
    moe_layer_matrices =
        attention_matrices + static_cast<double>(m.hidden_size) * moe.num_experts +
        static_cast<double>(moe.experts_per_token) *
            static_cast<double>(mlp_matrix_parameters(m, moe.expert_ffn_hidden_size)) +
        static_cast<double>(moe.num_shared_experts) *
            static_cast<double>(mlp_matrix_parameters(m, moe.shared_expert_ffn_hidden_size)) +
        (moe.shared_expert_gate ? static_cast<double>(m.hidden_size) : 0.0);
  }
  const double lm_head_parameters = static_cast<double>(m.vocab_size) * m.hidden_size;
  // Per token and layer, QKᵀ multiplies a query with seq_length keys of the query/key width and AV
  // seq_length values of the value width (the same width but for latent attention).
  const auto value_width =
      static_cast<double>(m.mla ? m.num_attention_heads * m.mla->v_head_dim : m.attention_width());
  const double attention_per_layer = 2.0 * static_cast<double>(seq_length) *
                                     (static_cast<double>(m.attention_width()) + value_width);
  // A windowed layer's query meets at most its window's keys.
  double attention_all_layers = static_cast<double>(m.num_layers) * attention_per_layer;
  if (m.sliding_window && m.sliding_window->size < seq_length) {
    const auto windowed = static_cast<double>(m.sliding_window->windowed_layers(m.num_layers));
    attention_all_layers -=
        windowed * attention_per_layer *
        (1.0 - static_cast<double>(m.sliding_window->size) / static_cast<double>(seq_length));
  }

  FlopsPerToken flops;
  flops.forward = attention_all_layers +
                  static_cast<double>(m.num_layers - moe_layers) * 2.0 * dense_layer_matrices +
                  static_cast<double>(moe_layers) * 2.0 * moe_layer_matrices +
                  2.0 * lm_head_parameters;
  if (m.mtp) {
    // Each MTP module (Megatron's count): eh_proj (2h → h), a layer of the last layer's kind with
    // its attention, and the shared head once more.
    const double window = static_cast<double>(m.attention_window(m.num_layers));
    const double module_attention =
        window > 0 && window < static_cast<double>(seq_length)
            ? attention_per_layer * window / static_cast<double>(seq_length)
            : attention_per_layer;
    const double hidden = static_cast<double>(m.hidden_size);
    const double module =
        module_attention +
        2.0 * (m.is_moe_layer(m.num_layers) ? moe_layer_matrices : dense_layer_matrices) +
        2.0 * 2.0 * hidden * hidden + 2.0 * lm_head_parameters;
    flops.forward += static_cast<double>(m.mtp->num_modules) * module;
  }
  flops.backward = 2.0 * flops.forward;
  return flops;
}

}  // namespace strata::costmodels
