// Attention of one block of queries against one block of keys and values, forward and backward,
// for attention computed in pieces: context parallelism's ring, where a rank's queries meet every
// other rank's keys one block at a time (Liu et al. 2023, "Ring Attention"; Megatron-LM's
// context-parallel attention). The pieces combine exactly: the forward merges each block's
// normalised output and log-sum-exp into the running ones (the online softmax of flash
// attention), and the backward, given the final output and log-sum-exp, recomputes each block's
// probabilities and adds its share of dq, dk and dv. CPU backend.
//
// Layouts, per batch row b:
//   qkv  [batch, q_seq, qkv_width]  the fused projection's rows (causal_attention.h's layout); the
//                                   block's queries are rows [q_row, q_row + rows)
//   kv   [batch, k_seq, 2·kv_heads·head_dim]  keys then values of every kv head (kv_width): the
//                                   block's keys and values are rows [k_row, k_row + rows)
//   out  [batch, q_seq, heads·head_dim], lse [batch, heads, q_seq]: the queries' running output
//                                   and log-sum-exp (−∞ before the first block)
#pragma once

#include <cstdint>

#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// Which keys of a block a query sees: all of them (the keys come earlier in the sequence), or
// those up to its own position (queries and keys are the same positions: the diagonal block).
// Under a sliding window (AttentionShape::window) only those less than the window back, by the
// block's position_offset; a query may then see none of a block's keys.
enum class BlockMask { full, causal };

struct AttentionBlock {
  std::int64_t q_row = 0;  // first query row in qkv's sequence
  std::int64_t k_row = 0;  // first key row in kv's sequence
  std::int64_t rows = 0;   // queries and keys in the block (one chunk of a sequence each)
  BlockMask mask = BlockMask::full;
  // Sequence position of the block's first query minus that of its first key: what ALiBi's
  // distances and a sliding window's reach start from (the blocks of a context-parallel rank
  // come from distant chunks).
  std::int64_t position_offset = 0;
};

// Keys and values of every kv head, [batch, seq, kv_width], copied out of qkv: what a ring sends.
std::int64_t kv_width(const AttentionShape& shape);
void extract_keys_values(const Tensor& qkv, const AttentionShape& shape, Tensor& kv);
// qkv's key and value columns += kv (the gradient of what extract_keys_values copied).
void add_keys_values_gradient(const Tensor& dkv, const AttentionShape& shape, Tensor& dqkv);

// Fills out with 0 and lse with −∞: the state before the first block.
void attention_blocks_begin(Tensor& out, Tensor& lse);

// Merges the block's attention into out and lse.
void attention_block_forward(const Tensor& qkv, const Tensor& kv, const AttentionBlock& block,
                             const AttentionShape& shape, Tensor& out, Tensor& lse);

// D = Σ_d dout·out per (batch, head, query) [batch, heads, q_seq]: the softmax backward's row
// term, computed once from the final output for every block's backward.
void attention_output_dot(const Tensor& dout, const Tensor& out, const AttentionShape& shape,
                          Tensor& output_dot);

// The block's share of the gradients, from the final out's lse and D: dqkv's query columns and
// dkv accumulate.
void attention_block_backward(const Tensor& dout, const Tensor& qkv, const Tensor& kv,
                              const Tensor& lse, const Tensor& output_dot,
                              const AttentionBlock& block, const AttentionShape& shape,
                              Tensor& dqkv, Tensor& dkv);

}  // namespace strata::executor
