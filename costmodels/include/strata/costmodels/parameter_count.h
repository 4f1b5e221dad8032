// Parameter counts of a model by component, exactly as the weights are stored (biases and norm
// scales included). Used by `strata describe`, the memory model and the FLOP counts.
#pragma once

#include <cstdint>

#include "strata/schemas/model_config.h"

namespace strata::costmodels {

struct ParameterBreakdown {
  std::int64_t token_embedding = 0;     // vocab × hidden
  std::int64_t position_embedding = 0;  // max_seq × hidden, learned positions only
  std::int64_t embedding_norm = 0;      // BLOOM's norm after the embedding
  // q, k, v, output projections and their biases, the query/key norms; for latent attention the
  // down and up projections of the q and kv latents and the latents' norms.
  std::int64_t attention_per_layer = 0;
  // Of attention_per_layer, what tensor parallelism replicates instead of splitting: the query
  // and key norms, and latent attention's down projections and latent norms (Megatron-Core
  // computes them whole on every tp rank).
  std::int64_t attention_replicated_per_layer = 0;
  std::int64_t mlp_per_layer = 0;  // a dense layer's two (GELU) or three (SwiGLU) matrices, biases
  std::int64_t norms_per_layer = 0;  // the two pre-norms' scales (and LayerNorm biases)
  std::int64_t final_norm = 0;
  std::int64_t lm_head = 0;  // 0 when tied to the token embedding
  std::int64_t num_layers = 0;

  // Mixture of experts: num_moe_layers of the num_layers hold, instead of the dense MLP, a router
  // (its gate matrix, expert bias and shared-expert gate), num_routed_experts experts of
  // routed_expert parameters of which each token visits experts_per_token, and shared experts.
  std::int64_t num_moe_layers = 0;
  std::int64_t router_per_moe_layer = 0;
  std::int64_t routed_expert = 0;
  std::int64_t num_routed_experts = 0;
  std::int64_t experts_per_token = 0;
  std::int64_t shared_experts_per_moe_layer = 0;

  // Multi-token prediction: num_mtp_modules modules, each its two input norms, eh_proj and final
  // norm (mtp_module_extra) around one layer of the last layer's kind (MoE when mtp_layer_moe);
  // they share the main model's embedding and head.
  std::int64_t num_mtp_modules = 0;
  std::int64_t mtp_module_extra = 0;
  bool mtp_layer_moe = false;

  std::int64_t num_dense_layers() const { return num_layers - num_moe_layers; }
  std::int64_t mtp_layer() const {
    return attention_per_layer + norms_per_layer +
           (mtp_layer_moe ? moe_per_layer() : mlp_per_layer);
  }
  std::int64_t mtp_module() const { return mtp_module_extra + mtp_layer(); }
  std::int64_t mtp() const { return num_mtp_modules * mtp_module(); }
  // What a Hugging Face checkpoint stores for them: each module with its own copy of the
  // embedding and of the output head (DeepSeek-V3's embed_tokens and shared_head.head).
  std::int64_t mtp_with_copies() const { return mtp() + num_mtp_modules * 2 * token_embedding; }
  std::int64_t per_dense_layer() const {
    return attention_per_layer + mlp_per_layer + norms_per_layer;
  }
  std::int64_t routed_experts_per_moe_layer() const { return num_routed_experts * routed_expert; }
  std::int64_t moe_per_layer() const {
    return router_per_moe_layer + routed_experts_per_moe_layer() + shared_experts_per_moe_layer;
  }
  std::int64_t embeddings() const { return token_embedding + position_embedding + embedding_norm; }
  // The main model's parameters and the MTP modules' (trained; the shared embedding and head
  // counted once).
  std::int64_t main_model() const {
    return embeddings() + num_layers * (attention_per_layer + norms_per_layer) +
           num_dense_layers() * mlp_per_layer + num_moe_layers * moe_per_layer() + final_norm +
           lm_head;
  }
  std::int64_t total() const { return main_model() + mtp(); }
  // The parameters one token's forward pass through the main model multiplies with: all but the
  // routed experts it does not visit (the router and shared experts count), without the MTP
  // modules (DeepSeek-V3's "37B activated"). Equal to main_model() for a dense model.
  std::int64_t active() const {
    return main_model() - num_moe_layers * (num_routed_experts - experts_per_token) * routed_expert;
  }
};

ParameterBreakdown count_parameters(const schemas::ModelConfig& model);

// One layer's parameters on one rank: `dense`, held by every rank of the stage's tp group in
// its tp share (attention, the dense MLP or the shared experts, and whole: the norms and
// replicated attention parts, a MoE layer's router), whose gradients are summed over dp·cp; and
// `expert`, a MoE layer's routed experts split over ep·etp, summed over the expert data-parallel
// group.
struct RankParameters {
  double dense = 0;
  double expert = 0;
  double total() const { return dense + expert; }
};
RankParameters rank_layer_parameters(const ParameterBreakdown& counts, std::int64_t tp,
                                     std::int64_t ep, std::int64_t etp, bool moe_layer);

// The most parameters one layer puts on a rank: the larger of a dense layer's and, in a MoE
// model, a MoE layer's with its expert share. What layer-by-layer ZeRO-3 holds gathered, and
// what the gathers beside the embedding and the head move.
double largest_layer_parameters_on_rank(const ParameterBreakdown& counts, std::int64_t tp,
                                        std::int64_t ep, std::int64_t etp);

// The weight matrices of one layer's attention (no biases or norms): what its GEMMs multiply by,
// the FLOP counts' and kernel models' shapes. Latent attention's five projections included.
std::int64_t attention_matrix_parameters(const schemas::ModelConfig& model);

// One MLP of `width` in the model's MLP kind (GELU/squared ReLU: up and down; SwiGLU: gate, up,
// down), matrices only.
std::int64_t mlp_matrix_parameters(const schemas::ModelConfig& model, std::int64_t width);

}  // namespace strata::costmodels
