#include "strata/executor/model/latent_attention.h"

#include <fmt/format.h>

#include "norm_dispatch.h"
#include "strata/executor/ops/column_block.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/residual.h"

namespace strata::executor {
namespace {

Tensor zeros_like_rows(std::int64_t rows, std::int64_t width, const Tensor& like) {
  return Tensor::zeros({rows, width}, like.scalar_type(), like.device());
}

// A [batch, seq, width] tensor, what the rotary op takes, for rows of the qkv's micro-batch.
Tensor sequences_of(const Tensor& qkv, std::int64_t width) {
  return Tensor::zeros({qkv.size(0), qkv.size(1), width}, qkv.scalar_type(), qkv.device());
}

// y = norm(x) with the statistics in `mean` and `rstd`, sized here.
void latent_norm_forward(const schemas::ModelConfig& model, const Tensor& x,
                         const ParameterEntry& weight, const ParameterEntry* bias, Tensor& mean,
                         Tensor& rstd, Tensor& y) {
  const ScalarType statistics = detail::statistics_type(x.scalar_type());
  mean = Tensor::zeros({x.size(0)}, statistics, x.device());
  rstd = Tensor::zeros({x.size(0)}, statistics, x.device());
  y = Tensor::zeros(x.shape(), x.scalar_type(), x.device());
  detail::norm_forward(model.norm, x, weight.compute, bias ? &bias->compute : nullptr,
                       model.norm_epsilon, y, mean, rstd);
}

}  // namespace

LatentAttention::LatentAttention(const schemas::ModelConfig& model, std::int64_t layer,
                                 ParameterStore& store, const AttentionShape& local,
                                 const ContextParallelism& cp)
    : model_(model), mla_(*model.mla), local_(local), cp_(cp) {
  const auto entry = [&](const char* suffix) {
    return &store.entry(fmt::format("layers.{}.attention.{}", layer, suffix));
  };
  const auto optional = [&](const char* suffix) -> ParameterEntry* {
    const std::string name = fmt::format("layers.{}.attention.{}", layer, suffix);
    return store.contains(name) ? &store.entry(name) : nullptr;
  };
  if (mla_.q_lora_rank > 0) {
    q_down_ = entry("q_down.weight");
    q_norm_weight_ = entry("q_latent_norm.weight");
    q_norm_bias_ = optional("q_latent_norm.bias");
    q_up_ = entry("q_up.weight");
  } else {
    q_ = entry("q.weight");
  }
  kv_down_ = entry("kv_down.weight");
  kv_norm_weight_ = entry("kv_latent_norm.weight");
  kv_norm_bias_ = optional("kv_latent_norm.bias");
  kv_up_ = entry("kv_up.weight");
  STRATA_CHECK(local.num_kv_heads == local.num_heads && local.head_dim == mla_.qk_head_dim(),
               "layer {}: latent attention over {} heads and {} kv heads of {}", layer,
               local.num_heads, local.num_kv_heads, local.head_dim);
}

void LatentAttention::forward(const Tensor& x, Tensor& qkv, LatentAttentionActivations& a) const {
  const std::int64_t tokens = x.size(0), heads = local_.num_heads, width = local_.qkv_width();
  const std::int64_t kv_width = mla_.kv_lora_rank + rope(), kv_up_width = nope() + mla_.v_head_dim;
  STRATA_CHECK(qkv.numel() == tokens * width, "latent attention: qkv {} for {} tokens",
               shape_to_string(qkv.shape()), tokens);
  qkv.fill_zero();  // the values' padding columns stay zero
  // Queries, straight into their heads' columns.
  Tensor q = zeros_like_rows(tokens, heads * head_dim(), x);
  if (q_down_ != nullptr) {
    a.q_latent = zeros_like_rows(tokens, mla_.q_lora_rank, x);
    linear_forward(x, q_down_->compute, nullptr, a.q_latent);
    latent_norm_forward(model_, a.q_latent, *q_norm_weight_, q_norm_bias_, a.q_mean, a.q_rstd,
                        a.q_normed);
    linear_forward(a.q_normed, q_up_->compute, nullptr, q);
  } else {
    linear_forward(x, q_->compute, nullptr, q);
  }
  write_column_block(q, width, 0, qkv);
  // The kv latent: c through its norm and the up projection, k_rope whole.
  a.kv_latent = zeros_like_rows(tokens, kv_width, x);
  linear_forward(x, kv_down_->compute, nullptr, a.kv_latent);
  a.kv_input = zeros_like_rows(tokens, mla_.kv_lora_rank, x);
  copy_column_block(a.kv_latent, kv_width, 0, a.kv_input);
  latent_norm_forward(model_, a.kv_input, *kv_norm_weight_, kv_norm_bias_, a.kv_mean, a.kv_rstd,
                      a.kv_normed);
  Tensor kv = zeros_like_rows(tokens, heads * kv_up_width, x);
  linear_forward(a.kv_normed, kv_up_->compute, nullptr, kv);
  Tensor keys = zeros_like_rows(tokens, heads * nope(), x);
  copy_head_columns(kv, heads * kv_up_width, 0, kv_up_width, heads, keys);
  write_head_columns(keys, width, key_column(0), head_dim(), heads, qkv);
  Tensor values = zeros_like_rows(tokens, heads * mla_.v_head_dim, x);
  copy_head_columns(kv, heads * kv_up_width, nope(), kv_up_width, heads, values);
  write_head_columns(values, width, local_.v_column(0), head_dim(), heads, qkv);
  // Positions: the queries' rotary parts, and the one rotary key every head shares.
  Tensor q_rope = sequences_of(qkv, heads * rope());
  copy_head_columns(qkv, width, nope(), head_dim(), heads, q_rope);
  rotary_forward_local(cp_, q_rope, heads, rope(), *model_.rope_theta);
  write_head_columns(q_rope, width, nope(), head_dim(), heads, qkv);
  Tensor k_rope = sequences_of(qkv, rope());
  copy_column_block(a.kv_latent, kv_width, mla_.kv_lora_rank, k_rope);
  rotary_forward_local(cp_, k_rope, 1, rope(), *model_.rope_theta);
  for (std::int64_t h = 0; h < heads; ++h) {
    write_column_block(k_rope, width, key_column(h) + nope(), qkv);
  }
}

void LatentAttention::backward(Tensor& d_qkv, const Tensor& x, const LatentAttentionActivations& a,
                               Tensor& dx) const {
  const std::int64_t tokens = x.size(0), heads = local_.num_heads, width = local_.qkv_width();
  const std::int64_t kv_width = mla_.kv_lora_rank + rope(), kv_up_width = nope() + mla_.v_head_dim;
  // The rotations undone on the gradients: the queries' in place, the shared key's summed over
  // the heads first.
  Tensor dq_rope = sequences_of(d_qkv, heads * rope());
  copy_head_columns(d_qkv, width, nope(), head_dim(), heads, dq_rope);
  rotary_backward_local(cp_, dq_rope, heads, rope(), *model_.rope_theta);
  write_head_columns(dq_rope, width, nope(), head_dim(), heads, d_qkv);
  Tensor dk_rope = sequences_of(d_qkv, rope());
  Tensor head_part = sequences_of(d_qkv, rope());
  for (std::int64_t h = 0; h < heads; ++h) {
    copy_column_block(d_qkv, width, key_column(h) + nope(), head_part);
    residual_forward(dk_rope, head_part, dk_rope);
  }
  rotary_backward_local(cp_, dk_rope, 1, rope(), *model_.rope_theta);
  // The queries' projections.
  Tensor dq = zeros_like_rows(tokens, heads * head_dim(), x);
  copy_column_block(d_qkv, width, 0, dq);
  if (q_down_ != nullptr) {
    Tensor d_normed = zeros_like_rows(tokens, mla_.q_lora_rank, x);
    linear_backward(dq, a.q_normed, q_up_->compute, &d_normed, q_up_->gradient, nullptr);
    Tensor d_latent = zeros_like_rows(tokens, mla_.q_lora_rank, x);
    detail::norm_backward(model_.norm, d_normed, a.q_latent, q_norm_weight_->compute, a.q_mean,
                          a.q_rstd, d_latent, q_norm_weight_->gradient,
                          q_norm_bias_ ? &q_norm_bias_->gradient : nullptr);
    dx.fill_zero();
    linear_backward(d_latent, x, q_down_->compute, &dx, q_down_->gradient, nullptr);
  } else {
    dx.fill_zero();
    linear_backward(dq, x, q_->compute, &dx, q_->gradient, nullptr);
  }
  // The keys' and values' projections.
  Tensor d_kv = zeros_like_rows(tokens, heads * kv_up_width, x);
  Tensor d_keys = zeros_like_rows(tokens, heads * nope(), x);
  copy_head_columns(d_qkv, width, key_column(0), head_dim(), heads, d_keys);
  write_head_columns(d_keys, heads * kv_up_width, 0, kv_up_width, heads, d_kv);
  Tensor d_values = zeros_like_rows(tokens, heads * mla_.v_head_dim, x);
  copy_head_columns(d_qkv, width, local_.v_column(0), head_dim(), heads, d_values);
  write_head_columns(d_values, heads * kv_up_width, nope(), kv_up_width, heads, d_kv);
  Tensor d_normed = zeros_like_rows(tokens, mla_.kv_lora_rank, x);
  linear_backward(d_kv, a.kv_normed, kv_up_->compute, &d_normed, kv_up_->gradient, nullptr);
  Tensor d_latent = zeros_like_rows(tokens, kv_width, x);
  Tensor d_input = zeros_like_rows(tokens, mla_.kv_lora_rank, x);
  detail::norm_backward(model_.norm, d_normed, a.kv_input, kv_norm_weight_->compute, a.kv_mean,
                        a.kv_rstd, d_input, kv_norm_weight_->gradient,
                        kv_norm_bias_ ? &kv_norm_bias_->gradient : nullptr);
  write_column_block(d_input, kv_width, 0, d_latent);
  write_column_block(dk_rope, kv_width, mla_.kv_lora_rank, d_latent);
  linear_backward(d_latent, x, kv_down_->compute, &dx, kv_down_->gradient, nullptr);
}

void LatentAttention::compact_output(const Tensor& attention_out,
                                     LatentAttentionActivations& a) const {
  const std::int64_t tokens = attention_out.numel() / local_.output_width();
  a.values = zeros_like_rows(tokens, values_width(), attention_out);
  copy_head_columns(attention_out, local_.output_width(), 0, head_dim(), local_.num_heads,
                    a.values);
}

void LatentAttention::expand_output_gradient(const Tensor& d_values,
                                             Tensor& d_attention_out) const {
  d_attention_out.fill_zero();
  write_head_columns(d_values, local_.output_width(), 0, head_dim(), local_.num_heads,
                     d_attention_out);
}

}  // namespace strata::executor
