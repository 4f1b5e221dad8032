// A tiny copy of a model with every feature of the original: the same architecture, positions,
// norms, MLP kind, biases, tied or untied embeddings, query/key and embedding norms, grouped-query
// ratio (multi-head, grouped or multi-query), latent attention, sliding windows and attention
// sinks, the clamped SwiGLU's limit and α, and a mixture-of-experts block
// with the same router (score function, expert bias, group-limited routing, capacity) and the
// same dense-then-MoE pattern — at sizes a test trains in seconds on one CPU core and that the
// test layouts divide (tp 2 and 4 split the heads, ep 2 the experts, cp 2 the sequence).
// `strata describe --model NAME --shrink` prints it; the executor's tests train the shrunk copy
// of every preset against PyTorch and under every layout.
#pragma once

#include "strata/schemas/model_config.h"

namespace strata::schemas {

// Sizes: 4 query heads of 8 features (latent attention: nope 8 + rope 4, values 8, latents 16),
// hidden 32, MLP 64, experts 16 wide, at most 8 routed experts of which 2 per token, vocabulary
// 256 (every byte), sequences up to 64, 2 layers — or, with MoE, at most one leading dense layer
// and two MoE layers at the original's interval (at most 2); sliding windows of at most 12 keys
// (full attention every 2nd layer where the original has full layers); no dropout. The name
// gains "-shrunk".
ModelConfig shrink_model(const ModelConfig& model);

}  // namespace strata::schemas
