// Multi-token prediction (DeepSeek-V3; schemas/multi_token_prediction.h): what one MTP module
// computes before and after its transformer layer, and the labels every module is scored on.
// Module k (from 1) reads the token k places ahead and the previous module's normalised output
// (the main model's, after its final norm, for k = 1):
//   x = eh_proj([enorm(embed(t_{i+k})); hnorm(h_{k−1})]),  h_k = final_norm(layer(x)),
// scores h_k with the shared output head against t_{i+k+1}, and averages over the positions that
// have such a token. Transformer runs the modules on its last stage with its own embedding and
// head ops; this file holds the module's parameters, its input projection and the label rules.
// eh_proj is replicated over tp (the parameter table's choice): each rank projects its own
// tokens, and under sequence parallelism its gradient is a partial sum like a norm's gain.
// CPU backend (the CUDA backend refuses MTP).
#pragma once

#include <cstdint>
#include <vector>

#include "strata/executor/model/context_parallel.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// Labels of every depth in one tensor: labels [(1 + depths)·batch, seq] from targets [batch, seq]
// of whole sequences — rows [k·batch, (k + 1)·batch) hold depth k, targets rolled k places left
// (labels[k][b, i] = targets[b, i + k]), 0 where i + k ≥ seq (those positions are not scored;
// Megatron-Core's roll_tensor fills the same zeros). Depth 0 is the targets themselves; module k
// embeds depth k − 1 and is scored against depth k. Host tensors.
void stack_future_labels(const Tensor& targets, std::int64_t depths, Tensor& labels);

// Local rows [row, row + count) of a micro-batch of batch local sequences whose token has no
// label `depth` places ahead (global position ≥ seq_length − depth), under cp's chunk order.
struct RowRange {
  std::int64_t row = 0, count = 0;
};
std::vector<RowRange> unlabelled_rows(const ContextParallelism& cp, std::int64_t batch,
                                      std::int64_t local_seq, std::int64_t depth);

// The norms' and the projection's state of one micro-batch.
struct MtpInputActivations {
  Tensor embedded_norm, embedded_mean, embedded_rstd;
  Tensor hidden_norm, hidden_mean, hidden_rstd;
  Tensor combined;  // [tokens, 2·hidden]: [enorm(embedded); hnorm(hidden)]
};

class MtpModule {
 public:
  // Module `module` (from 1) of `model`, whose parameters `store` holds.
  MtpModule(const schemas::ModelConfig& model, std::int64_t module, ParameterStore& store);

  std::int64_t layer() const { return layer_; }  // its transformer layer: num_layers + module − 1
  std::int64_t unit() const { return unit_; }    // its parameter unit (ZeRO-3 gathers it whole)
  ParameterEntry& final_norm_weight() const { return *final_norm_weight_; }
  ParameterEntry* final_norm_bias() const { return final_norm_bias_; }

  // x [tokens, hidden] = eh_proj([enorm(embedded); hnorm(hidden)]).
  void input_forward(const Tensor& embedded, const Tensor& hidden, MtpInputActivations& a,
                     Tensor& x) const;
  // From dx: d_embedded and d_hidden accumulate (+=) the gradients of the module's two inputs,
  // the norms' and eh_proj's parameters theirs. d_combined [tokens, 2·hidden] and d_norm
  // [tokens, hidden] are scratch.
  void input_backward(const Tensor& dx, const Tensor& embedded, const Tensor& hidden,
                      const MtpInputActivations& a, Tensor& d_combined, Tensor& d_norm,
                      Tensor& d_embedded, Tensor& d_hidden) const;

 private:
  const schemas::ModelConfig& model_;
  std::int64_t layer_ = 0, unit_ = 0;
  ParameterEntry *enorm_weight_ = nullptr, *enorm_bias_ = nullptr;
  ParameterEntry *hnorm_weight_ = nullptr, *hnorm_bias_ = nullptr;
  ParameterEntry* eh_proj_ = nullptr;
  ParameterEntry *final_norm_weight_ = nullptr, *final_norm_bias_ = nullptr;
};

}  // namespace strata::executor
