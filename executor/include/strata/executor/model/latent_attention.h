// LatentAttention: multi-head latent attention (DeepSeek-V2/V3, Kimi K2; Megatron-Core's MLA) —
// the projections around the attention kernel, on this rank's heads. CPU backend.
//
//   x ─ q_down ─ q_latent_norm ─ q_up ──────────── q = [q_nope | q_rope] per head
//   x ─ kv_down ─┬─ c ─ kv_latent_norm ─ kv_up ─── [k_nope | v] per head
//                └─ k_rope (one for all heads)
//   rotary positions on q_rope and k_rope; k = [k_nope | k_rope] per head
//
// (Without a q latent, q = x·W_qᵀ.) The heads are assembled into the fused qkv rows every
// attention path reads (causal, the cp ring, all-gather): head_dim = nope + rope for queries and
// keys, and each value zero-padded from v_head_dim to that width, so the softmax scale is
// 1/√(nope + rope) as DeepSeek's and the output's padding columns are zero. compact_output drops
// them before the output projection, expand_output_gradient puts zeros back.
//
// Rotary positions turn the rotary part of each head by rotate-half pairs (the executor's rotary
// op on those columns). Under tensor parallelism each rank holds whole heads (q_up, kv_up and the
// output split by heads, as the parameter table says) and the down projections and latent norms
// whole: their gradients, and the input's, are partial sums over the tp group (the table marks
// them partial_over_tensor_parallel; the layer's reduce_sequence sums the input's).
#pragma once

#include <cstdint>

#include "strata/executor/model/context_parallel.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/tensor/tensor.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// What the backward needs from one micro-batch's forward.
struct LatentAttentionActivations {
  Tensor q_latent, q_mean, q_rstd, q_normed;     // with a q latent: [tokens, q_lora_rank]
  Tensor kv_latent;                              // [tokens, kv_lora_rank + rope]: c, k_rope
  Tensor kv_input, kv_mean, kv_rstd, kv_normed;  // c, contiguous, and its norm
  Tensor values;                                 // [tokens, heads · v]: the compacted output
};

class LatentAttention {
 public:
  // `local`: this rank's heads of layer `layer` (num_kv_heads = num_heads, head_dim = nope + rope).
  LatentAttention(const schemas::ModelConfig& model, std::int64_t layer, ParameterStore& store,
                  const AttentionShape& local, const ContextParallelism& cp);

  // x [tokens, hidden] → qkv [batch, seq, qkv_width] of the assembled heads, positions applied.
  void forward(const Tensor& x, Tensor& qkv, LatentAttentionActivations& a) const;
  // dx = ∂/∂x (overwritten; a partial sum over tp) from d_qkv, the gradient of the assembled
  // heads; the projections' and latent norms' gradients accumulate. d_qkv is used as scratch.
  void backward(Tensor& d_qkv, const Tensor& x, const LatentAttentionActivations& a,
                Tensor& dx) const;

  // The attention output [tokens, heads · (nope + rope)] without the values' padding:
  // a.values [tokens, heads · v], what the output projection reads.
  void compact_output(const Tensor& attention_out, LatentAttentionActivations& a) const;
  // The gradient of the padded output from that of the compacted one (zeros in the padding).
  void expand_output_gradient(const Tensor& d_values, Tensor& d_attention_out) const;
  std::int64_t values_width() const { return local_.num_heads * mla_.v_head_dim; }

 private:
  std::int64_t head_dim() const { return local_.head_dim; }
  std::int64_t rope() const { return mla_.qk_rope_head_dim; }
  std::int64_t nope() const { return mla_.qk_nope_head_dim; }
  // First column of head h's key and value in a qkv row.
  std::int64_t key_column(std::int64_t h) const { return local_.k_column(h); }

  const schemas::ModelConfig& model_;
  const schemas::MlaConfig& mla_;
  AttentionShape local_;
  const ContextParallelism& cp_;
  ParameterEntry* q_down_ = nullptr;  // with a q latent, else q_ projects x straight to heads
  ParameterEntry* q_norm_weight_ = nullptr;
  ParameterEntry* q_norm_bias_ = nullptr;
  ParameterEntry* q_up_ = nullptr;
  ParameterEntry* q_ = nullptr;
  ParameterEntry* kv_down_;
  ParameterEntry* kv_norm_weight_;
  ParameterEntry* kv_norm_bias_;
  ParameterEntry* kv_up_;
};

}  // namespace strata::executor
