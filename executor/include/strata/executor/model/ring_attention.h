// Ring attention: the causal attention of a context-parallel rank's local sequence (its chunks r
// and 2cp−1−r, context_parallel.h) against the whole sequence, without any rank holding the
// whole sequence's keys. Each rank's keys and values (kv heads only: under GQA a fraction of the
// queries' width) travel once around the cp ring; while one block travels, the rank attends to
// the block in hand (ops/attention_block.h), so communication hides behind compute as the
// simulator prices it (costmodels: cp − 1 point-to-point steps beside the attention). The
// backward sends the keys and values around again with their gradients, summed along the way and
// passed on while the next step computes; each arrives back at its owner after the last step.
//
// Which blocks a query chunk q meets: key chunks k < q whole, k = q causally (the diagonal),
// k > q not at all. With the load-balanced split every rank computes the same number of blocks.
#pragma once

#include "strata/executor/model/context_parallel.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// Buffers of one ring pass, reused across layers and micro-batches (one set per rank).
struct RingAttentionBuffers {
  Tensor keys_values[2];       // [batch, local seq, kv width]: the block in hand and the next
  Tensor keys_values_grad[2];  // this rank's contribution: one computed while the other is sent
  Tensor keys_values_grad_arriving;  // the sum of the ranks before, arriving meanwhile
  Tensor output_dot;                 // [batch, heads, local seq]
};

// qkv [batch, local seq, qkv width] → out [batch, local seq, heads·d], lse [batch, heads, local
// seq], as causal_attention_forward gives for these queries on one device. Collective over cp.
void ring_attention_forward(const ContextParallelism& cp, const Tensor& qkv,
                            const AttentionShape& shape, Tensor& out, Tensor& lse,
                            RingAttentionBuffers& buffers);
// Accumulates dqkv from dout, given the forward's qkv, out and lse. Collective over cp.
void ring_attention_backward(const ContextParallelism& cp, const Tensor& dout, const Tensor& qkv,
                             const Tensor& out, const Tensor& lse, const AttentionShape& shape,
                             Tensor& dqkv, RingAttentionBuffers& buffers);

}  // namespace strata::executor
