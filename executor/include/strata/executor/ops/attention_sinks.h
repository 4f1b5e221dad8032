// Attention sinks (GPT-OSS; Xiao et al. 2024's sink token, learned): each head has a logit s_h
// that joins every query's softmax as a key with no value, so a head can put weight on nothing:
//   p_ij = exp(x_ij) / (Σ_j' exp(x_ij') + exp(s_h)),   o_i = Σ_j p_ij v_j.
// Applied after attention over the real keys, whichever way that ran (one device, cp ring or
// all-gather), as one more block in the online softmax: lse' = log(exp(lse) + exp(s_h)) and
// o' = o·exp(lse − lse'). The attention backward then runs unchanged on o' and lse' (its
// probabilities are the sink-normalised ones, and Σ dO·O' is still the softmax row term), and
// the sink's gradient is ∂L/∂s_h = −Σ_i exp(s_h − lse'_i)·Σ_d dO_i·o'_i.
//
// Layouts as causal_attention.h: out [batch, seq, heads·d], lse [batch, heads, seq]; sinks
// [heads], this rank's heads (split with them under tensor parallelism). CPU backend.
#pragma once

#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// out and lse: attention over the keys → with each head's sink merged in.
void attention_sinks_forward(const Tensor& sinks, const AttentionShape& shape, Tensor& out,
                             Tensor& lse);
// dsinks += ∂L/∂sinks, from dout and the merged out and lse.
void attention_sinks_backward(const Tensor& dout, const Tensor& out, const Tensor& lse,
                              const Tensor& sinks, const AttentionShape& shape, Tensor& dsinks);

}  // namespace strata::executor
