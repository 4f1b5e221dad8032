// FLOPs per token of a model's forward and backward passes: the "model FLOPs" that MFU divides
// by. Used by `strata describe` and, later, by the simulator's MFU.
#pragma once

#include <cstdint>

#include "strata/schemas/model_config.h"

namespace strata::costmodels {

struct FlopsPerToken {
  double forward = 0;
  double backward = 0;  // input and weight gradients: twice the forward
  double training() const { return forward + backward; }
};

// Counts every matrix multiply as 2·m·n·k: the layers' weight matrices, the LM head (also when
// tied) and attention's QKᵀ and AV over the full seq_length × seq_length score matrix — the
// convention of Megatron-LM's and PaLM's MFU formulas, although causal kernels skip about half
// of it; a sliding-window layer counts its window's keys instead of seq_length (the window's
// whole band, by the same convention). Norms, activations and softmax are left out, as in those
// formulas. A mixture-of-experts
// layer counts its router and only the experts a token visits (top k routed, every shared one).
FlopsPerToken model_flops_per_token(const schemas::ModelConfig& model, std::int64_t seq_length);

}  // namespace strata::costmodels
