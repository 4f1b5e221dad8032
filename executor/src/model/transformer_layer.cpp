#include "strata/executor/model/transformer_layer.h"

#include <fmt/format.h>

#include <cmath>

#include "activation_dispatch.h"
#include "norm_dispatch.h"
#include "strata/executor/ops/attention_sinks.h"
#include "strata/executor/ops/bias.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/residual.h"
#include "strata/executor/ops/rotary.h"

namespace strata::executor {
namespace {

using schemas::ModelConfig;

std::string name_of(std::int64_t index, const char* suffix) {
  return fmt::format("layers.{}.{}", index, suffix);
}

ParameterEntry* optional_entry(ParameterStore& store, const std::string& name) {
  return store.contains(name) ? &store.entry(name) : nullptr;
}

Tensor* gradient_of(ParameterEntry* entry) { return entry ? &entry->gradient : nullptr; }
// The tensor the model computes with: the working copy under mixed precision.
const Tensor* value_of(const ParameterEntry* entry) { return entry ? &entry->compute : nullptr; }

}  // namespace

DropoutKey dropout_key(const ModelConfig& model, const DropoutContext& context,
                       std::uint32_t site) {
  return DropoutKey{.seed = context.seed,
                    .step = context.step,
                    .site = site,
                    .first_token = context.first_token,
                    .first_feature = 0,
                    .total_features = model.hidden_size};
}

AttentionShape local_attention_shape(const ModelConfig& model, std::int64_t tp_size,
                                     std::int64_t tp_rank) {
  const std::int64_t heads = model.num_attention_heads / tp_size;
  const bool alibi = model.position_embedding == schemas::PositionEmbedding::alibi;
  return AttentionShape{
      .num_heads = heads,
      .num_kv_heads = model.num_kv_heads >= tp_size ? model.num_kv_heads / tp_size : 1,
      .head_dim = model.head_dim,
      .alibi_heads = alibi ? model.num_attention_heads : 0,
      .first_head = tp_rank * heads};
}

void LayerScratch::resize(const ModelConfig& model, const TensorParallelism& tp, std::int64_t batch,
                          std::int64_t seq, ScalarType type, Device device) {
  if (batch == batch_ && seq == seq_ && d_norm_full.scalar_type() == type &&
      d_norm_full.device() == device) {
    return;
  }
  batch_ = batch;
  seq_ = seq;
  const std::int64_t tokens = batch * seq;
  const std::int64_t local = tp.local_tokens(tokens);
  const std::int64_t hidden = model.hidden_size;
  const AttentionShape attention = local_attention_shape(model, tp.size());
  const std::int64_t ffn = model.ffn_hidden_size / tp.size();
  const bool sp = tp.shards_tokens();
  branch_full = Tensor::zeros({tokens, hidden}, type, device);
  // Without token sharding the local tensors are the full ones: no copies between them.
  branch = sp ? Tensor::zeros({local, hidden}, type, device) : branch_full;
  norm_local = sp ? Tensor::zeros({local, hidden}, type, device) : Tensor();
  mlp_full = sp ? Tensor::zeros({tokens, hidden}, type, device) : Tensor();
  d_norm_full = Tensor::zeros({tokens, hidden}, type, device);
  d_norm = sp ? Tensor::zeros({local, hidden}, type, device) : d_norm_full;
  d_attention = Tensor::zeros({tokens, attention.output_width()}, type, device);
  d_qkv = Tensor::zeros({tokens, attention.qkv_width()}, type, device);
  d_hidden = Tensor::zeros({tokens, ffn}, type, device);
  d_gate = Tensor::zeros({tokens, ffn}, type, device);
  d_up = schemas::is_gated(model.mlp_activation) ? Tensor::zeros({tokens, ffn}, type, device)
                                                 : Tensor();
  d_middle = Tensor::zeros({local, hidden}, type, device);
  d_attention_branch = Tensor::zeros({local, hidden}, type, device);
  d_branch = Tensor::zeros({local, hidden}, type, device);
  d_branch_full = sp ? Tensor::zeros({tokens, hidden}, type, device) : Tensor();
}

TransformerLayer::TransformerLayer(const ModelConfig& model, std::int64_t index,
                                   ParameterStore& store, const TensorParallelism& tp,
                                   const ContextParallelism& cp, ExpertParallelism ep)
    : model_(model),
      index_(index),
      tp_(tp),
      cp_(cp),
      shape_(local_attention_shape(model, tp.size(), tp.rank())),
      gated_mlp_(schemas::is_gated(model.mlp_activation)) {
  shape_.window = model.attention_window(index);
  if (model.qk_norm) qk_norm_.emplace(model, index, store, shape_);
  attention_sinks_ = optional_entry(store, name_of(index, "attention.sinks"));
  if (model.mla) mla_.emplace(model, index, store, shape_, cp);
  attention_norm_weight_ = &store.entry(name_of(index, "attention_norm.weight"));
  attention_norm_bias_ = optional_entry(store, name_of(index, "attention_norm.bias"));
  qkv_weight_ = optional_entry(store, name_of(index, "attention.qkv.weight"));
  qkv_bias_ = optional_entry(store, name_of(index, "attention.qkv.bias"));
  attention_output_weight_ = &store.entry(name_of(index, "attention.output.weight"));
  attention_output_bias_ = optional_entry(store, name_of(index, "attention.output.bias"));
  mlp_norm_weight_ = &store.entry(name_of(index, "mlp_norm.weight"));
  mlp_norm_bias_ = optional_entry(store, name_of(index, "mlp_norm.bias"));
  if (model.is_moe_layer(index)) {
    moe_.emplace(model, index, store, tp_, ep, cp.group);
    mlp_in_weight_ = mlp_in_bias_ = mlp_up_weight_ = mlp_up_bias_ = nullptr;
    mlp_output_weight_ = mlp_output_bias_ = nullptr;
  } else {
    mlp_in_weight_ = &store.entry(name_of(index, gated_mlp_ ? "mlp.gate.weight" : "mlp.fc.weight"));
    mlp_in_bias_ =
        optional_entry(store, name_of(index, gated_mlp_ ? "mlp.gate.bias" : "mlp.fc.bias"));
    mlp_up_weight_ = gated_mlp_ ? &store.entry(name_of(index, "mlp.up.weight")) : nullptr;
    mlp_up_bias_ = gated_mlp_ ? optional_entry(store, name_of(index, "mlp.up.bias")) : nullptr;
    mlp_output_weight_ = &store.entry(name_of(index, "mlp.output.weight"));
    mlp_output_bias_ = optional_entry(store, name_of(index, "mlp.output.bias"));
  }
  STRATA_CHECK(mla_ || qkv_weight_->shape[0] == shape_.qkv_width(),
               "layer {}: qkv slice of {} rows for {} heads and {} kv heads", index,
               qkv_weight_ ? qkv_weight_->shape[0] : 0, shape_.num_heads, shape_.num_kv_heads);
}

void TransformerLayer::branch_dropout_forward(const DropoutContext& dropout,
                                              const LayerActivations& a, int branch,
                                              Tensor& x) const {
  // Site 0 is the embedding's; layer l uses 1 + 2l (attention branch) and 2 + 2l (MLP branch).
  const DropoutKey key =
      dropout_key(model_, dropout, static_cast<std::uint32_t>(1 + 2 * index_ + branch));
  dropout_forward_local(cp_, tp_.first_local_token(a.batch * a.seq), a.seq, x, model_.dropout, key,
                        x);
}

void TransformerLayer::branch_dropout_backward(const DropoutContext& dropout,
                                               const LayerActivations& a, int branch,
                                               const Tensor& dy, Tensor& dx) const {
  const DropoutKey key =
      dropout_key(model_, dropout, static_cast<std::uint32_t>(1 + 2 * index_ + branch));
  dropout_backward_local(cp_, tp_.first_local_token(a.batch * a.seq), a.seq, dy, model_.dropout,
                         key, dx);
}

void run_deferred_weight_gradients(DeferredWeightGradients& work) {
  for (DeferredWeightGradient& item : work) {
    linear_backward_parameters(item.dy, item.x, item.weight->gradient,
                               item.bias ? &item.bias->gradient : nullptr);
  }
  work.clear();
}

void TransformerLayer::linear_gradients(const Tensor& dy, const Tensor& x, ParameterEntry* weight,
                                        ParameterEntry* bias, Tensor& dx, GradientWrite write,
                                        DeferredWeightGradients* deferred) {
  linear_backward_input(dy, weight->compute, dx, write);
  if (deferred != nullptr) {
    deferred->push_back(DeferredWeightGradient{dy.to(dy.device()), x.to(x.device()), weight, bias});
    return;
  }
  linear_backward_parameters(dy, x, weight->gradient, gradient_of(bias));
}

void TransformerLayer::allocate(LayerActivations& a, std::int64_t batch, std::int64_t seq,
                                ScalarType type, Device device) {
  const Shape qkv_shape{batch, seq, shape_.qkv_width()};
  if (a.qkv.shape() == qkv_shape && a.qkv.scalar_type() == type && a.qkv.device() == device) {
    return;
  }
  const ScalarType statistics = detail::statistics_type(type);
  const std::int64_t tokens = batch * seq;
  const std::int64_t local = tp_.local_tokens(tokens);
  const std::int64_t hidden = model_.hidden_size;
  // A MoE layer's MLP intermediates depend on the routing: MoeMlp sizes them per micro-batch.
  const std::int64_t ffn = moe_ ? 0 : mlp_in_weight_->shape[0];
  a.mean1 = Tensor::zeros({local}, statistics, device);
  a.rstd1 = Tensor::zeros({local}, statistics, device);
  a.norm1_full = Tensor::zeros({tokens, hidden}, type, device);
  a.qkv = Tensor::zeros(qkv_shape, type, device);
  a.attention_out = Tensor::zeros({batch, seq, shape_.output_width()}, type, device);
  a.lse = Tensor::zeros({batch, shape_.num_heads, seq}, statistics, device);
  a.middle = Tensor::zeros({local, hidden}, type, device);
  a.mean2 = Tensor::zeros({local}, statistics, device);
  a.rstd2 = Tensor::zeros({local}, statistics, device);
  a.norm2_full = Tensor::zeros({tokens, hidden}, type, device);
  a.hidden_in = Tensor::zeros({tokens, ffn}, type, device);
  a.up = gated_mlp_ ? Tensor::zeros({tokens, ffn}, type, device) : Tensor();
  a.hidden_out = Tensor::zeros({tokens, ffn}, type, device);
}

void TransformerLayer::forward(const Tensor& x, Tensor& out, std::int64_t batch, std::int64_t seq,
                               const DropoutContext& dropout, LayerScratch& scratch,
                               LayerActivations& a) {
  allocate(a, batch, seq, x.scalar_type(), x.device());
  a.batch = batch;
  a.seq = seq;
  scratch.resize(model_, tp_, batch, seq, x.scalar_type(), x.device());
  const double p = dropout.active ? model_.dropout : 0.0;
  const bool sp = tp_.shards_tokens();
  const std::int64_t hidden = model_.hidden_size;
  // Attention branch.
  Tensor& norm1 = sp ? scratch.norm_local : a.norm1_full;
  detail::norm_forward(model_.norm, x, attention_norm_weight_->compute,
                       value_of(attention_norm_bias_), model_.norm_epsilon, norm1, a.mean1,
                       a.rstd1);
  gather_sequence(tp_, norm1, a.norm1_full);
  if (mla_) {
    mla_->forward(a.norm1_full, a.qkv, a.mla);  // positions applied to the rotary parts
  } else {
    linear_forward(a.norm1_full, qkv_weight_->compute, value_of(qkv_bias_), a.qkv);
    if (qk_norm_) qk_norm_->forward(a.qkv, a.qk_norm);
    if (model_.rope_theta) {
      rotary_forward_local(cp_, a.qkv, shape_.num_heads + shape_.num_kv_heads, shape_.head_dim,
                           *model_.rope_theta);
    }
  }
  if (cp_.active() && cp_.comm == schemas::ContextParallelComm::all_gather) {
    all_gather_attention_forward(cp_, a.qkv, shape_, a.attention_out, a.lse, scratch.all_gathered);
  } else if (cp_.active()) {
    ring_attention_forward(cp_, a.qkv, shape_, a.attention_out, a.lse, scratch.ring);
  } else {
    causal_attention_forward(a.qkv, shape_, a.attention_out, a.lse);
  }
  if (attention_sinks_) {
    attention_sinks_forward(attention_sinks_->compute, shape_, a.attention_out, a.lse);
  }
  if (mla_) mla_->compact_output(a.attention_out, a.mla);  // the values' padding dropped
  linear_forward(mla_ ? a.mla.values : a.attention_out, attention_output_weight_->compute,
                 separate_bias() ? nullptr : value_of(attention_output_bias_), scratch.branch_full);
  reduce_sequence(tp_, scratch.branch_full, scratch.branch);
  if (separate_bias() && attention_output_bias_) {
    bias_forward(scratch.branch, attention_output_bias_->compute);
  }
  if (p > 0) branch_dropout_forward(dropout, a, 0, scratch.branch);
  residual_forward(x, scratch.branch, a.middle);
  // MLP branch.
  Tensor& norm2 = sp ? scratch.norm_local : a.norm2_full;
  detail::norm_forward(model_.norm, a.middle, mlp_norm_weight_->compute, value_of(mlp_norm_bias_),
                       model_.norm_epsilon, norm2, a.mean2, a.rstd2);
  gather_sequence(tp_, norm2, a.norm2_full);
  Tensor mlp_branch = out.reshaped({out.numel() / hidden, hidden});
  Tensor& mlp_partial = sp ? scratch.mlp_full : mlp_branch;
  if (moe_) {
    // Each rank's own tokens come out whole: the routed experts run on them, and the shared
    // experts reduce-scatter inside.
    moe_->forward(a.norm2_full, mlp_branch, a.moe);
  } else {
    if (gated_mlp_) {
      linear_forward(a.norm2_full, mlp_in_weight_->compute, value_of(mlp_in_bias_), a.hidden_in);
      linear_forward(a.norm2_full, mlp_up_weight_->compute, value_of(mlp_up_bias_), a.up);
      detail::gated_activation_forward(model_, a.hidden_in, a.up, a.hidden_out);
    } else {
      detail::linear_activation_forward(model_.mlp_activation, a.norm2_full,
                                        mlp_in_weight_->compute, value_of(mlp_in_bias_),
                                        a.hidden_in, a.hidden_out);
    }
    linear_forward(a.hidden_out, mlp_output_weight_->compute,
                   separate_bias() ? nullptr : value_of(mlp_output_bias_), mlp_partial);
    reduce_sequence(tp_, mlp_partial, mlp_branch);
  }
  if (separate_bias() && mlp_output_bias_) bias_forward(mlp_branch, mlp_output_bias_->compute);
  if (p > 0) branch_dropout_forward(dropout, a, 1, mlp_branch);
  residual_forward(a.middle, mlp_branch, mlp_branch);
}

void TransformerLayer::backward(const Tensor& x, Tensor& out, const Tensor& d_out, Tensor& dx,
                                const DropoutContext& dropout, double loss_scale,
                                LayerScratch& scratch, LayerActivations& a,
                                DeferredWeightGradients* deferred) {
  if (recomputes()) forward(x, out, a.batch, a.seq, dropout, scratch, a);
  const double p = model_.dropout;
  const bool sp = tp_.shards_tokens();
  scratch.resize(model_, tp_, a.batch, a.seq, x.scalar_type(), x.device());
  // The MLP residual: d_middle starts as d_out, and the MLP branch sees d_out too.
  Tensor& d_middle = scratch.d_middle;
  d_middle.copy_from(d_out);
  const Tensor* d_mlp = &d_out;
  if (p > 0) {
    scratch.d_branch.fill_zero();
    branch_dropout_backward(dropout, a, 1, d_out, scratch.d_branch);
    d_mlp = &scratch.d_branch;
  }
  if (separate_bias() && mlp_output_bias_) bias_backward(*d_mlp, mlp_output_bias_->gradient);
  if (sp && !moe_) {
    gather_sequence(tp_, *d_mlp, scratch.d_branch_full);
    d_mlp = &scratch.d_branch_full;
  }
  if (moe_) {
    // The rank's own tokens' gradients in, its tokens' input gradients out.
    const auto routed_tokens = static_cast<double>(tp_.local_tokens(a.norm2_full.size(0)));
    moe_->backward(*d_mlp, a.norm2_full, a.moe, loss_scale * routed_tokens, scratch.d_norm);
  } else {
    // Scratch gradients that one op fills are overwritten, not zeroed and then accumulated into.
    linear_gradients(*d_mlp, a.hidden_out, mlp_output_weight_,
                     separate_bias() ? nullptr : mlp_output_bias_, scratch.d_hidden,
                     GradientWrite::overwrite, deferred);
    if (gated_mlp_) {
      scratch.d_gate.fill_zero();
      scratch.d_up.fill_zero();
      detail::gated_activation_backward(model_, scratch.d_hidden, a.hidden_in, a.up, scratch.d_gate,
                                        scratch.d_up);
      linear_gradients(scratch.d_up, a.norm2_full, mlp_up_weight_, mlp_up_bias_,
                       scratch.d_norm_full, GradientWrite::overwrite, deferred);
    } else {
      detail::activation_backward(model_.mlp_activation, scratch.d_hidden, a.hidden_in,
                                  scratch.d_gate, GradientWrite::overwrite);
    }
    // The gate's input gradient adds to the up projection's (llama) or is the only one (gpt).
    linear_gradients(scratch.d_gate, a.norm2_full, mlp_in_weight_, mlp_in_bias_,
                     scratch.d_norm_full,
                     gated_mlp_ ? GradientWrite::accumulate : GradientWrite::overwrite, deferred);
    reduce_sequence(tp_, scratch.d_norm_full, scratch.d_norm);
  }
  detail::norm_backward(model_.norm, scratch.d_norm, a.middle, mlp_norm_weight_->compute, a.mean2,
                        a.rstd2, d_middle, mlp_norm_weight_->gradient, gradient_of(mlp_norm_bias_));
  // The attention residual: dx gets d_middle, and so does the attention branch.
  scratch.d_attention_branch.fill_zero();
  residual_backward(d_middle, dx, scratch.d_attention_branch);
  const Tensor* d_branch = &scratch.d_attention_branch;
  if (p > 0) {
    scratch.d_branch.fill_zero();
    branch_dropout_backward(dropout, a, 0, scratch.d_attention_branch, scratch.d_branch);
    d_branch = &scratch.d_branch;
  }
  if (separate_bias() && attention_output_bias_) {
    bias_backward(*d_branch, attention_output_bias_->gradient);
  }
  if (sp) {
    gather_sequence(tp_, *d_branch, scratch.d_branch_full);
    d_branch = &scratch.d_branch_full;
  }
  if (mla_) {
    Tensor d_values = Tensor::zeros({a.mla.values.size(0), mla_->values_width()},
                                    a.mla.values.scalar_type(), a.mla.values.device());
    linear_gradients(*d_branch, a.mla.values, attention_output_weight_,
                     separate_bias() ? nullptr : attention_output_bias_, d_values,
                     GradientWrite::overwrite, deferred);
    mla_->expand_output_gradient(d_values, scratch.d_attention);
  } else {
    linear_gradients(*d_branch, a.attention_out, attention_output_weight_,
                     separate_bias() ? nullptr : attention_output_bias_, scratch.d_attention,
                     GradientWrite::overwrite, deferred);
  }
  scratch.d_qkv.fill_zero();
  Tensor d_qkv = scratch.d_qkv.reshaped(a.qkv.shape());
  const Tensor d_attention = scratch.d_attention.reshaped(a.attention_out.shape());
  if (attention_sinks_) {
    attention_sinks_backward(d_attention, a.attention_out, a.lse, attention_sinks_->compute, shape_,
                             attention_sinks_->gradient);
  }
  if (cp_.active() && cp_.comm == schemas::ContextParallelComm::all_gather) {
    all_gather_attention_backward(cp_, d_attention, a.qkv, a.attention_out, a.lse, shape_, d_qkv,
                                  scratch.all_gathered);
  } else if (cp_.active()) {
    ring_attention_backward(cp_, d_attention, a.qkv, a.attention_out, a.lse, shape_, d_qkv,
                            scratch.ring);
  } else {
    causal_attention_backward(d_attention, a.qkv, a.attention_out, a.lse, shape_, d_qkv);
  }
  if (mla_) {
    // Its projections' weight gradients are computed now, deferred or not.
    mla_->backward(d_qkv, a.norm1_full, a.mla, scratch.d_norm_full);
  } else {
    if (model_.rope_theta) {
      rotary_backward_local(cp_, d_qkv, shape_.num_heads + shape_.num_kv_heads, shape_.head_dim,
                            *model_.rope_theta);
    }
    if (qk_norm_) qk_norm_->backward(d_qkv, a.qk_norm);
    linear_gradients(d_qkv, a.norm1_full, qkv_weight_, qkv_bias_, scratch.d_norm_full,
                     GradientWrite::overwrite, deferred);
  }
  reduce_sequence(tp_, scratch.d_norm_full, scratch.d_norm);
  detail::norm_backward(model_.norm, scratch.d_norm, x, attention_norm_weight_->compute, a.mean1,
                        a.rstd1, dx, attention_norm_weight_->gradient,
                        gradient_of(attention_norm_bias_));
}

}  // namespace strata::executor
