#include "strata/executor/model/transformer.h"

#include <fmt/format.h>

#include "norm_dispatch.h"
#include "strata/executor/ops/cross_entropy.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/ops/embedding.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/position_embedding.h"
#include "strata/executor/ops/reduction.h"
#include "strata/schemas/input_error.h"

namespace strata::executor {

using schemas::ModelConfig;

void check_executor_supports(const ModelConfig& model, const std::string& source,
                             const std::string& json_prefix) {
  auto refuse = [&](const char* field, std::string rule) {
    throw schemas::InputError(source, json_prefix + "/" + field, std::move(rule));
  };
  if (model.position_embedding != schemas::PositionEmbedding::learned &&
      model.position_embedding != schemas::PositionEmbedding::rope) {
    refuse(
        "position_embedding",
        fmt::format("the executor builds learned or rope positions, not {}",
                    schemas::name_of(model.position_embedding, schemas::kPositionEmbeddingNames)));
  }
  if (model.mlp_activation != schemas::MlpActivation::gelu &&
      model.mlp_activation != schemas::MlpActivation::swiglu) {
    refuse("mlp_activation",
           fmt::format("the executor builds gelu or swiglu MLPs, not {}",
                       schemas::name_of(model.mlp_activation, schemas::kMlpActivationNames)));
  }
  if (model.embedding_norm) refuse("embedding_norm", "the executor builds no embedding norm");
}

std::vector<ParameterSpec> transformer_parameters(const ModelConfig& model) {
  const InitRule embedding_init{InitKind::normal, 0.02};
  std::vector<ParameterSpec> specs;
  specs.push_back({"embedding.word", {model.vocab_size, model.hidden_size}, embedding_init, true});
  if (model.position_embedding == schemas::PositionEmbedding::learned) {
    specs.push_back(
        {"embedding.position", {model.max_seq_length, model.hidden_size}, embedding_init, true});
  }
  for (std::int64_t layer = 0; layer < model.num_layers; ++layer) {
    for (ParameterSpec& spec : transformer_layer_parameters(model, layer)) {
      specs.push_back(std::move(spec));
    }
  }
  specs.push_back({"final_norm.weight", {model.hidden_size}, {InitKind::ones, 0}, false});
  if (model.norm == schemas::NormKind::layernorm) {
    specs.push_back({"final_norm.bias", {model.hidden_size}, {InitKind::zeros, 0}, false});
  }
  if (!model.tied_embeddings) {
    specs.push_back(
        {"lm_head.weight", {model.vocab_size, model.hidden_size}, embedding_init, true});
  }
  return specs;
}

Transformer::Transformer(ModelConfig model, ScalarType type, std::uint64_t seed, Device device)
    : model_(std::move(model)),
      type_(type),
      statistics_type_(type == ScalarType::bfloat16 ? ScalarType::float32 : type),
      device_(device) {
  check_executor_supports(model_, fmt::format("model {}", model_.name), "");
  // bfloat16 computes with a working copy of float32 masters (and float32 gradients).
  parameters_ = std::make_unique<ParameterStore>(transformer_parameters(model_), statistics_type_,
                                                 device_, type_);
  parameters_->initialize(seed);
  layers_.reserve(static_cast<std::size_t>(model_.num_layers));
  for (std::int64_t layer = 0; layer < model_.num_layers; ++layer) {
    layers_.emplace_back(model_, layer, *parameters_);
  }
  word_embedding_ = &parameters_->entry("embedding.word");
  position_embedding_ = parameters_->contains("embedding.position")
                            ? &parameters_->entry("embedding.position")
                            : nullptr;
  final_norm_weight_ = &parameters_->entry("final_norm.weight");
  final_norm_bias_ =
      parameters_->contains("final_norm.bias") ? &parameters_->entry("final_norm.bias") : nullptr;
  lm_head_ = model_.tied_embeddings ? word_embedding_ : &parameters_->entry("lm_head.weight");
}

void Transformer::allocate(std::int64_t batch, std::int64_t seq) {
  if (batch == batch_ && seq == seq_) return;
  batch_ = batch;
  seq_ = seq;
  const std::int64_t tokens = batch * seq;
  residuals_.clear();
  for (std::int64_t i = 0; i <= model_.num_layers; ++i) {
    residuals_.push_back(Tensor::zeros({batch, seq, model_.hidden_size}, type_, device_));
  }
  final_norm_ = Tensor::zeros({tokens, model_.hidden_size}, type_, device_);
  final_mean_ = Tensor::zeros({tokens}, statistics_type_, device_);
  final_rstd_ = Tensor::zeros({tokens}, statistics_type_, device_);
  // The backward overwrites the logits with their gradient: one [tokens, vocab] buffer, not two.
  logits_ = Tensor::zeros({tokens, model_.vocab_size}, type_, device_);
  losses_ = Tensor::zeros({tokens}, statistics_type_, device_);
  log_sum_exp_ = Tensor::zeros({tokens}, statistics_type_, device_);
  d_final_norm_ = Tensor::zeros({tokens, model_.hidden_size}, type_, device_);
  d_residual_ = Tensor::zeros({batch, seq, model_.hidden_size}, type_, device_);
  d_residual_next_ = Tensor::zeros({batch, seq, model_.hidden_size}, type_, device_);
}

double Transformer::forward(const Tensor& inputs, const Tensor& targets,
                            const DropoutContext& dropout) {
  STRATA_CHECK(inputs.dim() == 2 && inputs.shape() == targets.shape(),
               "inputs {} and targets {} must both be [batch, seq]",
               shape_to_string(inputs.shape()), shape_to_string(targets.shape()));
  const std::int64_t seq = inputs.size(1);
  STRATA_CHECK(seq <= model_.max_seq_length, "sequence {} longer than the model's {}", seq,
               model_.max_seq_length);
  STRATA_CHECK(inputs.device() == device_ && targets.device() == device_,
               "inputs on {} for a model on {}", device_name(inputs.device()),
               device_name(device_));
  allocate(inputs.size(0), seq);
  Tensor& x = residuals_.front();
  embedding_forward(inputs, word_embedding_->compute, x);
  if (position_embedding_ != nullptr) position_embedding_forward(position_embedding_->compute, x);
  if (model_.dropout > 0) {
    dropout_forward(x, model_.dropout, dropout_key(model_, dropout, 0), x);
  }
  for (std::size_t layer = 0; layer < layers_.size(); ++layer) {
    layers_[layer].forward(residuals_[layer], residuals_[layer + 1], dropout);
  }
  detail::norm_forward(model_.norm, residuals_.back(), final_norm_weight_->compute,
                       final_norm_bias_ ? &final_norm_bias_->compute : nullptr, model_.norm_epsilon,
                       final_norm_, final_mean_, final_rstd_);
  linear_forward(final_norm_, lm_head_->compute, nullptr, logits_);
  cross_entropy_forward(logits_, targets, losses_, log_sum_exp_);
  return sum_of(losses_) / static_cast<double>(losses_.numel());
}

double Transformer::forward_loss(const Tensor& inputs, const Tensor& targets,
                                 const DropoutContext& dropout) {
  return forward(inputs, targets, dropout);
}

double Transformer::forward_backward(const Tensor& inputs, const Tensor& targets, double loss_scale,
                                     const DropoutContext& dropout) {
  const double loss = forward(inputs, targets, dropout);
  Tensor& d_logits = logits_;  // overwritten in place
  cross_entropy_backward(logits_, targets, log_sum_exp_, loss_scale, d_logits);
  d_final_norm_.fill_zero();
  linear_backward(d_logits, final_norm_, lm_head_->compute, &d_final_norm_, lm_head_->gradient,
                  nullptr);
  d_residual_.fill_zero();
  detail::norm_backward(model_.norm, d_final_norm_, residuals_.back(), final_norm_weight_->compute,
                        final_mean_, final_rstd_, d_residual_, final_norm_weight_->gradient,
                        final_norm_bias_ ? &final_norm_bias_->gradient : nullptr);
  for (std::size_t layer = layers_.size(); layer-- > 0;) {
    d_residual_next_.fill_zero();
    layers_[layer].backward(residuals_[layer], d_residual_, d_residual_next_, dropout, scratch_);
    std::swap(d_residual_, d_residual_next_);
  }
  Tensor* d_embedded = &d_residual_;
  if (model_.dropout > 0) {
    d_residual_next_.fill_zero();
    dropout_backward(d_residual_, model_.dropout, dropout_key(model_, dropout, 0),
                     d_residual_next_);
    d_embedded = &d_residual_next_;
  }
  if (position_embedding_ != nullptr) {
    position_embedding_backward(*d_embedded, position_embedding_->gradient);
  }
  embedding_backward(inputs, *d_embedded, word_embedding_->gradient);
  return loss;
}

}  // namespace strata::executor
