// All-gather attention: context parallelism's other way for a rank's queries (its chunks r and
// 2cp−1−r, context_parallel.h) to meet the keys of the whole sequence, Llama 3's choice (Megatron-
// Core's --cp-comm-type allgather). The forward all-gathers every cp rank's keys and values (kv
// heads only) once and attends to the visible blocks of each; the backward gathers them again,
// accumulates the gradient of every rank's keys and values in place, and reduce-scatters it so
// each rank gets the sum for its own. Fewer, larger messages than the ring (ring_attention.h) and
// no overlap with the attention: the plan's cp_comm says which runs, as the simulator prices each
// (costmodels/layer_costs.h).
#pragma once

#include "strata/executor/model/context_parallel.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// Buffers of one gather, reused across layers and micro-batches (one set per rank).
struct AllGatherAttentionBuffers {
  Tensor keys_values;       // [batch, local seq, kv width]: this rank's
  Tensor gathered;          // [cp, batch, local seq, kv width]: every rank's, in cp rank order
  Tensor gathered_grad;     // their gradients, summed over cp by the reduce-scatter
  Tensor keys_values_grad;  // this rank's part of the sum
  Tensor output_dot;        // [batch, heads, local seq]
};

// qkv [batch, local seq, qkv width] → out [batch, local seq, heads·d], lse [batch, heads, local
// seq], as causal_attention_forward gives for these queries on one device. Collective over cp.
void all_gather_attention_forward(const ContextParallelism& cp, const Tensor& qkv,
                                  const AttentionShape& shape, Tensor& out, Tensor& lse,
                                  AllGatherAttentionBuffers& buffers);
// Accumulates dqkv from dout, given the forward's qkv, out and lse. Collective over cp.
void all_gather_attention_backward(const ContextParallelism& cp, const Tensor& dout,
                                   const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                   const AttentionShape& shape, Tensor& dqkv,
                                   AllGatherAttentionBuffers& buffers);

}  // namespace strata::executor
