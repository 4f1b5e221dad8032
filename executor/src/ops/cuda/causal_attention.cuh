// CUDA launchers of causal grouped-query attention (ops/causal_attention.h), memory-efficient in
// the flash-attention sense: no [seq, seq] matrix is ever stored; the forward keeps one float32
// log-sum-exp per (batch, head, query) and the backward recomputes the probabilities from it.
//
// bfloat16 with head_dim 64 or 128 runs on tensor cores (flash_attention_*.cu: mma.sync
// m16n8k16, online softmax in registers); float32, and bfloat16 with other head dims, run a
// warp-per-query kernel in float32 arithmetic.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

struct AttentionDims {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t qkv_width() const { return (num_heads + 2 * num_kv_heads) * head_dim; }
  std::int64_t output_width() const { return num_heads * head_dim; }
};

// qkv [batch, seq, qkv_width] → out [batch, seq, output_width], lse [batch, heads, seq] (float32).
void launch_causal_attention_forward(const void* qkv, void* out, float* lse,
                                     const AttentionDims& dims, ScalarType type);
// dqkv (qkv's layout) += the gradient of Σ dout·out.
void launch_causal_attention_backward(const void* dout, const void* qkv, const void* out,
                                      const float* lse, void* dqkv, const AttentionDims& dims,
                                      ScalarType type);

}  // namespace strata::executor::cuda
