#include "strata/executor/model/transformer_layer.h"

#include <fmt/format.h>

#include <cmath>

#include "norm_dispatch.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/ops/gelu.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/residual.h"
#include "strata/executor/ops/rotary.h"
#include "strata/executor/ops/swiglu.h"

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

// Norm statistics and log-sum-exps: float32 under bfloat16 activations, else the activations' type.
ScalarType statistics_type(ScalarType activations) {
  return activations == ScalarType::bfloat16 ? ScalarType::float32 : activations;
}

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

std::vector<ParameterSpec> transformer_layer_parameters(const ModelConfig& model,
                                                        std::int64_t index) {
  const std::int64_t hidden = model.hidden_size;
  const std::int64_t ffn = model.ffn_hidden_size;
  const AttentionShape attention{model.num_attention_heads, model.num_kv_heads, model.head_dim};
  const bool layernorm = model.norm == schemas::NormKind::layernorm;
  // GPT-2's scaled init: residual-branch outputs get std 0.02/√(2·layers).
  const InitRule weight{InitKind::normal, 0.02};
  const InitRule residual_output{InitKind::normal,
                                 0.02 / std::sqrt(2.0 * static_cast<double>(model.num_layers))};
  const InitRule zeros{InitKind::zeros, 0};
  const InitRule ones{InitKind::ones, 0};
  std::vector<ParameterSpec> specs;
  auto add = [&](const char* suffix, Shape shape, InitRule init, bool decay) {
    specs.push_back(ParameterSpec{name_of(index, suffix), std::move(shape), init, decay});
  };
  add("attention_norm.weight", {hidden}, ones, false);
  if (layernorm) add("attention_norm.bias", {hidden}, zeros, false);
  add("attention.qkv.weight", {attention.qkv_width(), hidden}, weight, true);
  if (model.qkv_bias) add("attention.qkv.bias", {attention.qkv_width()}, zeros, false);
  add("attention.output.weight", {hidden, attention.output_width()}, residual_output, true);
  if (model.attention_output_bias) add("attention.output.bias", {hidden}, zeros, false);
  add("mlp_norm.weight", {hidden}, ones, false);
  if (layernorm) add("mlp_norm.bias", {hidden}, zeros, false);
  if (model.mlp_activation == schemas::MlpActivation::swiglu) {
    add("mlp.gate.weight", {ffn, hidden}, weight, true);
    if (model.mlp_bias) add("mlp.gate.bias", {ffn}, zeros, false);
    add("mlp.up.weight", {ffn, hidden}, weight, true);
    if (model.mlp_bias) add("mlp.up.bias", {ffn}, zeros, false);
  } else {
    add("mlp.fc.weight", {ffn, hidden}, weight, true);
    if (model.mlp_bias) add("mlp.fc.bias", {ffn}, zeros, false);
  }
  add("mlp.output.weight", {hidden, ffn}, residual_output, true);
  if (model.mlp_bias) add("mlp.output.bias", {hidden}, zeros, false);
  return specs;
}

void LayerScratch::resize(const ModelConfig& model, std::int64_t tokens, ScalarType type,
                          Device device) {
  const AttentionShape attention{model.num_attention_heads, model.num_kv_heads, model.head_dim};
  if (d_norm.numel() == tokens * model.hidden_size && d_norm.scalar_type() == type &&
      d_norm.device() == device) {
    return;
  }
  d_norm = Tensor::zeros({tokens, model.hidden_size}, type, device);
  d_attention = Tensor::zeros({tokens, attention.output_width()}, type, device);
  d_qkv = Tensor::zeros({tokens, attention.qkv_width()}, type, device);
  d_hidden = Tensor::zeros({tokens, model.ffn_hidden_size}, type, device);
  d_gate = Tensor::zeros({tokens, model.ffn_hidden_size}, type, device);
  d_up = Tensor::zeros({tokens, model.ffn_hidden_size}, type, device);
  d_middle = Tensor::zeros({tokens, model.hidden_size}, type, device);
  d_attention_branch = Tensor::zeros({tokens, model.hidden_size}, type, device);
}

TransformerLayer::TransformerLayer(const ModelConfig& model, std::int64_t index,
                                   ParameterStore& store)
    : model_(model),
      index_(index),
      shape_{model.num_attention_heads, model.num_kv_heads, model.head_dim},
      llama_mlp_(model.mlp_activation == schemas::MlpActivation::swiglu) {
  attention_norm_weight_ = &store.entry(name_of(index, "attention_norm.weight"));
  attention_norm_bias_ = optional_entry(store, name_of(index, "attention_norm.bias"));
  qkv_weight_ = &store.entry(name_of(index, "attention.qkv.weight"));
  qkv_bias_ = optional_entry(store, name_of(index, "attention.qkv.bias"));
  attention_output_weight_ = &store.entry(name_of(index, "attention.output.weight"));
  attention_output_bias_ = optional_entry(store, name_of(index, "attention.output.bias"));
  mlp_norm_weight_ = &store.entry(name_of(index, "mlp_norm.weight"));
  mlp_norm_bias_ = optional_entry(store, name_of(index, "mlp_norm.bias"));
  mlp_in_weight_ = &store.entry(name_of(index, llama_mlp_ ? "mlp.gate.weight" : "mlp.fc.weight"));
  mlp_in_bias_ =
      optional_entry(store, name_of(index, llama_mlp_ ? "mlp.gate.bias" : "mlp.fc.bias"));
  mlp_up_weight_ = llama_mlp_ ? &store.entry(name_of(index, "mlp.up.weight")) : nullptr;
  mlp_up_bias_ = llama_mlp_ ? optional_entry(store, name_of(index, "mlp.up.bias")) : nullptr;
  mlp_output_weight_ = &store.entry(name_of(index, "mlp.output.weight"));
  mlp_output_bias_ = optional_entry(store, name_of(index, "mlp.output.bias"));
}

std::uint32_t TransformerLayer::dropout_site(int branch) const {
  // Site 0 is the embedding's; layer l uses 1 + 2l (attention branch) and 2 + 2l (MLP branch).
  return static_cast<std::uint32_t>(1 + 2 * index_ + branch);
}

void TransformerLayer::allocate(std::int64_t batch, std::int64_t seq, ScalarType type,
                                Device device) {
  if (batch == batch_ && seq == seq_ && norm1_.scalar_type() == type && norm1_.device() == device) {
    return;
  }
  const ScalarType statistics = statistics_type(type);
  batch_ = batch;
  seq_ = seq;
  const std::int64_t tokens = batch * seq;
  const std::int64_t hidden = model_.hidden_size;
  const std::int64_t ffn = model_.ffn_hidden_size;
  norm1_ = Tensor::zeros({tokens, hidden}, type, device);
  mean1_ = Tensor::zeros({tokens}, statistics, device);
  rstd1_ = Tensor::zeros({tokens}, statistics, device);
  qkv_ = Tensor::zeros({batch, seq, shape_.qkv_width()}, type, device);
  attention_out_ = Tensor::zeros({batch, seq, shape_.output_width()}, type, device);
  lse_ = Tensor::zeros({batch, shape_.num_heads, seq}, statistics, device);
  branch_ = Tensor::zeros({tokens, hidden}, type, device);
  middle_ = Tensor::zeros({tokens, hidden}, type, device);
  norm2_ = Tensor::zeros({tokens, hidden}, type, device);
  mean2_ = Tensor::zeros({tokens}, statistics, device);
  rstd2_ = Tensor::zeros({tokens}, statistics, device);
  hidden_in_ = Tensor::zeros({tokens, ffn}, type, device);
  up_ = llama_mlp_ ? Tensor::zeros({tokens, ffn}, type, device) : Tensor();
  hidden_out_ = Tensor::zeros({tokens, ffn}, type, device);
}

void TransformerLayer::forward(const Tensor& x, Tensor& out, const DropoutContext& dropout) {
  allocate(x.size(0), x.size(1), x.scalar_type(), x.device());
  const double p = model_.dropout;
  // Attention branch.
  detail::norm_forward(model_.norm, x, attention_norm_weight_->compute,
                       value_of(attention_norm_bias_), model_.norm_epsilon, norm1_, mean1_, rstd1_);
  linear_forward(norm1_, qkv_weight_->compute, value_of(qkv_bias_), qkv_);
  if (model_.rope_theta) {
    rotary_forward(qkv_, shape_.num_heads + shape_.num_kv_heads, shape_.head_dim,
                   *model_.rope_theta);
  }
  causal_attention_forward(qkv_, shape_, attention_out_, lse_);
  linear_forward(attention_out_, attention_output_weight_->compute,
                 value_of(attention_output_bias_), branch_);
  if (p > 0) dropout_forward(branch_, p, dropout_key(model_, dropout, dropout_site(0)), branch_);
  residual_forward(x, branch_, middle_);
  // MLP branch.
  detail::norm_forward(model_.norm, middle_, mlp_norm_weight_->compute, value_of(mlp_norm_bias_),
                       model_.norm_epsilon, norm2_, mean2_, rstd2_);
  if (llama_mlp_) {
    linear_forward(norm2_, mlp_in_weight_->compute, value_of(mlp_in_bias_), hidden_in_);
    linear_forward(norm2_, mlp_up_weight_->compute, value_of(mlp_up_bias_), up_);
    swiglu_forward(hidden_in_, up_, hidden_out_);
  } else {
    linear_gelu_forward(norm2_, mlp_in_weight_->compute, value_of(mlp_in_bias_), hidden_in_,
                        hidden_out_);
  }
  Tensor mlp_branch = out.reshaped({batch_ * seq_, model_.hidden_size});
  linear_forward(hidden_out_, mlp_output_weight_->compute, value_of(mlp_output_bias_), mlp_branch);
  if (p > 0)
    dropout_forward(mlp_branch, p, dropout_key(model_, dropout, dropout_site(1)), mlp_branch);
  residual_forward(middle_, mlp_branch, mlp_branch);
}

void TransformerLayer::backward(const Tensor& x, const Tensor& d_out, Tensor& dx,
                                const DropoutContext& dropout, LayerScratch& scratch) {
  const double p = model_.dropout;
  scratch.resize(model_, batch_ * seq_, x.scalar_type(), x.device());
  // The MLP residual: d_middle starts as d_out, and the MLP branch sees d_out too.
  Tensor& d_middle = scratch.d_middle;
  d_middle.copy_from(d_out);
  const Tensor* d_mlp_out = &d_out;
  Tensor d_mlp_dropped;
  if (p > 0) {
    d_mlp_dropped = Tensor::zeros_like(d_out);
    dropout_backward(d_out, p, dropout_key(model_, dropout, dropout_site(1)), d_mlp_dropped);
    d_mlp_out = &d_mlp_dropped;
  }
  scratch.d_hidden.fill_zero();
  linear_backward(*d_mlp_out, hidden_out_, mlp_output_weight_->compute, &scratch.d_hidden,
                  mlp_output_weight_->gradient, gradient_of(mlp_output_bias_));
  scratch.d_gate.fill_zero();
  scratch.d_norm.fill_zero();
  if (llama_mlp_) {
    scratch.d_up.fill_zero();
    swiglu_backward(scratch.d_hidden, hidden_in_, up_, scratch.d_gate, scratch.d_up);
    linear_backward(scratch.d_up, norm2_, mlp_up_weight_->compute, &scratch.d_norm,
                    mlp_up_weight_->gradient, gradient_of(mlp_up_bias_));
  } else {
    gelu_backward(scratch.d_hidden, hidden_in_, scratch.d_gate);
  }
  linear_backward(scratch.d_gate, norm2_, mlp_in_weight_->compute, &scratch.d_norm,
                  mlp_in_weight_->gradient, gradient_of(mlp_in_bias_));
  detail::norm_backward(model_.norm, scratch.d_norm, middle_, mlp_norm_weight_->compute, mean2_,
                        rstd2_, d_middle, mlp_norm_weight_->gradient, gradient_of(mlp_norm_bias_));
  // The attention residual: dx gets d_middle, and so does the attention branch.
  scratch.d_attention_branch.fill_zero();
  residual_backward(d_middle, dx, scratch.d_attention_branch);
  const Tensor* d_branch = &scratch.d_attention_branch;
  Tensor d_branch_dropped;
  if (p > 0) {
    d_branch_dropped = Tensor::zeros_like(d_middle);
    dropout_backward(scratch.d_attention_branch, p, dropout_key(model_, dropout, dropout_site(0)),
                     d_branch_dropped);
    d_branch = &d_branch_dropped;
  }
  scratch.d_attention.fill_zero();
  linear_backward(*d_branch, attention_out_, attention_output_weight_->compute,
                  &scratch.d_attention, attention_output_weight_->gradient,
                  gradient_of(attention_output_bias_));
  scratch.d_qkv.fill_zero();
  Tensor d_qkv = scratch.d_qkv.reshaped(qkv_.shape());
  causal_attention_backward(scratch.d_attention.reshaped(attention_out_.shape()), qkv_,
                            attention_out_, lse_, shape_, d_qkv);
  if (model_.rope_theta) {
    rotary_backward(d_qkv, shape_.num_heads + shape_.num_kv_heads, shape_.head_dim,
                    *model_.rope_theta);
  }
  scratch.d_norm.fill_zero();
  linear_backward(d_qkv, norm1_, qkv_weight_->compute, &scratch.d_norm, qkv_weight_->gradient,
                  gradient_of(qkv_bias_));
  detail::norm_backward(model_.norm, scratch.d_norm, x, attention_norm_weight_->compute, mean1_,
                        rstd1_, dx, attention_norm_weight_->gradient,
                        gradient_of(attention_norm_bias_));
}

}  // namespace strata::executor
