// Softmax cross-entropy over the vocabulary, forward and backward. Used by the LM head's loss.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// losses[n] = log Σ_v exp(logits[n, v]) − logits[n, targets[n]] for logits [n, vocab] and int32
// targets [n] in [0, vocab).
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses);
// dlogits[n] += loss_scale·(softmax(logits[n]) − onehot(targets[n])); loss_scale is the weight
// of each token's loss in the step's loss (1 / tokens in the global batch for a mean).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, double loss_scale,
                            Tensor& dlogits);

}  // namespace strata::executor
