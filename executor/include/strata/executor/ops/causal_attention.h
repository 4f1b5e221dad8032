// Causal self-attention with grouped-query attention, forward and backward, in a memory-efficient
// (flash-attention style) formulation. Used by every transformer layer.
//
// What is stored between forward and backward: the output [b, t, heads·d] and one log-sum-exp per
// (batch, head, query) — never the t×t probability matrix. Backward recomputes the probabilities a
// block of 64 queries at a time from q, k and the log-sum-exp (Dao et al. 2022, algorithm 2).
// Attention-probability dropout is not applied (Llama and most modern recipes train without it).
//
// Row layout of qkv, as the fused projection writes it:
//   [ q head 0 | … | q head H−1 | k head 0 | … | k head G−1 | v head 0 | … | v head G−1 ]
// Query head h reads key/value head h / (H / G).
//
// ALiBi (Press et al. 2022; BLOOM): with AttentionShape::alibi_heads set, query i's score against
// key j gains −slope_h·(i − j) before the softmax, slope_h = alibi_slope(first_head + h,
// alibi_heads) by the head's place in the whole model, so a tensor-parallel rank's heads keep
// theirs. CPU backend; the CUDA kernels take no bias and refuse a shape that asks for one.
//
// Sliding windows (Mistral, GPT-OSS, Gemma 3): with AttentionShape::window = w, query i sees keys
// i − w + 1 … i only, and each block of queries multiplies only the keys its band reaches — the
// work falls from O(s²) to O(s·w), as a windowed flash kernel skips the tiles below the band.
// CPU backend, as ALiBi.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// ALiBi's slope of head `head` of `heads` (BLOOM's get_slopes): 2^(−8(i+1)/n) for a power of
// two n; otherwise those of the largest power of two below n, then every other slope of twice it.
double alibi_slope(std::int64_t head, std::int64_t heads);

struct AttentionShape {
  std::int64_t num_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim = 1;
  // ALiBi: the model's query heads (0: no position bias) and this rank's first of them.
  std::int64_t alibi_heads = 0;
  std::int64_t first_head = 0;
  // Keys a query sees on a sliding-window layer (itself and window − 1 before it); 0: all earlier.
  std::int64_t window = 0;
  std::int64_t qkv_width() const { return (num_heads + 2 * num_kv_heads) * head_dim; }
  std::int64_t output_width() const { return num_heads * head_dim; }
  // First columns, in a qkv row, of query head h and of the key and value heads it reads.
  std::int64_t kv_head_of(std::int64_t h) const { return h / (num_heads / num_kv_heads); }
  std::int64_t q_column(std::int64_t h) const { return h * head_dim; }
  std::int64_t k_column(std::int64_t h) const { return (num_heads + kv_head_of(h)) * head_dim; }
  std::int64_t v_column(std::int64_t h) const {
    return (num_heads + num_kv_heads + kv_head_of(h)) * head_dim;
  }
  // Local head h's ALiBi slope, 0 without ALiBi.
  double position_slope(std::int64_t h) const {
    return alibi_heads > 0 ? alibi_slope(first_head + h, alibi_heads) : 0.0;
  }
};

// qkv [batch, seq, qkv_width] → out [batch, seq, heads·d], lse [batch, heads, seq]; scale 1/√d.
void causal_attention_forward(const Tensor& qkv, const AttentionShape& shape, Tensor& out,
                              Tensor& lse);
// Accumulates dqkv (same layout as qkv) from dout.
void causal_attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                               const Tensor& lse, const AttentionShape& shape, Tensor& dqkv);

}  // namespace strata::executor
