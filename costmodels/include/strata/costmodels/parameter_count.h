// Parameter counts of a model by component, exactly as the weights are stored (biases and norm
// scales included). Used by `strata describe`, the memory model and the FLOP counts.
#pragma once

#include <cstdint>

#include "strata/schemas/model_config.h"

namespace strata::costmodels {

struct ParameterBreakdown {
  std::int64_t token_embedding = 0;      // vocab × hidden
  std::int64_t position_embedding = 0;   // max_seq × hidden, learned positions only
  std::int64_t embedding_norm = 0;       // BLOOM's norm after the embedding
  std::int64_t attention_per_layer = 0;  // q, k, v, output projections and their biases
  std::int64_t mlp_per_layer = 0;        // two (GELU) or three (SwiGLU) matrices and biases
  std::int64_t norms_per_layer = 0;      // the two pre-norms' scales (and LayerNorm biases)
  std::int64_t final_norm = 0;
  std::int64_t lm_head = 0;  // 0 when tied to the token embedding
  std::int64_t num_layers = 0;

  std::int64_t per_layer() const { return attention_per_layer + mlp_per_layer + norms_per_layer; }
  std::int64_t embeddings() const { return token_embedding + position_embedding + embedding_norm; }
  std::int64_t total() const {
    return embeddings() + num_layers * per_layer() + final_norm + lm_head;
  }
};

ParameterBreakdown count_parameters(const schemas::ModelConfig& model);

}  // namespace strata::costmodels
