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
  // The vocabulary splits by rows (Megatron's VocabParallelEmbedding and the LM head's
  // column-parallel rows); the position table and norms are replicated.
  const Placement vocabulary_rows = Placement::shard(0);
  const Placement replicated = Placement::replicate();
  std::vector<ParameterSpec> specs;
  specs.push_back({"embedding.word",
                   {model.vocab_size, model.hidden_size},
                   embedding_init,
                   true,
                   vocabulary_rows});
  if (model.position_embedding == schemas::PositionEmbedding::learned) {
    specs.push_back({"embedding.position",
                     {model.max_seq_length, model.hidden_size},
                     embedding_init,
                     true,
                     replicated});
  }
  for (std::int64_t layer = 0; layer < model.num_layers; ++layer) {
    for (ParameterSpec& spec : transformer_layer_parameters(model, layer)) {
      specs.push_back(std::move(spec));
    }
  }
  specs.push_back(
      {"final_norm.weight", {model.hidden_size}, {InitKind::ones, 0}, false, replicated});
  if (model.norm == schemas::NormKind::layernorm) {
    specs.push_back(
        {"final_norm.bias", {model.hidden_size}, {InitKind::zeros, 0}, false, replicated});
  }
  if (!model.tied_embeddings) {
    specs.push_back({"lm_head.weight",
                     {model.vocab_size, model.hidden_size},
                     embedding_init,
                     true,
                     vocabulary_rows});
  }
  return specs;
}

Transformer::Transformer(ModelConfig model, ScalarType type, std::uint64_t seed, Device device,
                         TransformerOptions options)
    : model_(std::move(model)),
      type_(type),
      statistics_type_(type == ScalarType::bfloat16 ? ScalarType::float32 : type),
      device_(device),
      options_(std::move(options)) {
  check_executor_supports(model_, fmt::format("model {}", model_.name), "");
  const TensorParallelism& tp = options_.tensor_parallel;
  STRATA_CHECK(!tp.active() || device_ == Device::cpu,
               "tensor parallelism runs on the CPU backend (the GPU backend trains one GPU)");
  STRATA_CHECK(options_.recomputed_layers >= 0 && options_.recomputed_layers <= model_.num_layers,
               "{} recomputed layers of {}", options_.recomputed_layers, model_.num_layers);
  // bfloat16 computes with a working copy of float32 masters (and float32 gradients).
  parameters_ = std::make_unique<ParameterStore>(
      transformer_parameters(model_), statistics_type_, device_, type_,
      StoreOptions{tp.rank(), tp.size(), options_.own_values, options_.own_gradients});
  if (options_.own_values) parameters_->initialize(seed);
  layers_.reserve(static_cast<std::size_t>(model_.num_layers));
  for (std::int64_t layer = 0; layer < model_.num_layers; ++layer) {
    layers_.emplace_back(model_, layer, *parameters_, options_.tensor_parallel);
    if (layer < options_.recomputed_layers) layers_.back().recompute_into(&recomputed_);
  }
  word_embedding_ = &parameters_->entry("embedding.word");
  position_embedding_ = parameters_->contains("embedding.position")
                            ? &parameters_->entry("embedding.position")
                            : nullptr;
  final_norm_weight_ = &parameters_->entry("final_norm.weight");
  final_norm_bias_ =
      parameters_->contains("final_norm.bias") ? &parameters_->entry("final_norm.bias") : nullptr;
  lm_head_ = model_.tied_embeddings ? word_embedding_ : &parameters_->entry("lm_head.weight");
  vocab_start_ = word_embedding_->runs.front().global_offset / model_.hidden_size;
}

void Transformer::allocate(std::int64_t batch, std::int64_t seq) {
  if (batch == batch_ && seq == seq_) return;
  const TensorParallelism& tp = options_.tensor_parallel;
  STRATA_CHECK(!tp.shards_tokens() || (batch * seq) % tp.size() == 0,
               "sequence parallelism splits {} tokens over {} ranks", batch * seq, tp.size());
  batch_ = batch;
  seq_ = seq;
  const std::int64_t tokens = batch * seq;
  const std::int64_t local = tp.local_tokens(tokens);
  const std::int64_t hidden = model_.hidden_size;
  const std::int64_t vocab = lm_head_->shape[0];  // this rank's rows
  const bool sp = tp.shards_tokens();
  residuals_.clear();
  for (std::int64_t i = 0; i <= model_.num_layers; ++i) {
    residuals_.push_back(Tensor::zeros({local, hidden}, type_, device_));
  }
  // Without token sharding the full-token tensors are the local ones.
  embedded_full_ = sp ? Tensor::zeros({tokens, hidden}, type_, device_) : residuals_.front();
  final_norm_ = Tensor::zeros({tokens, hidden}, type_, device_);
  final_norm_local_ = sp ? Tensor::zeros({local, hidden}, type_, device_) : final_norm_;
  final_mean_ = Tensor::zeros({local}, statistics_type_, device_);
  final_rstd_ = Tensor::zeros({local}, statistics_type_, device_);
  // The backward overwrites the logits with their gradient: one [tokens, vocab] buffer, not two.
  logits_ = Tensor::zeros({tokens, vocab}, type_, device_);
  losses_ = Tensor::zeros({tokens}, statistics_type_, device_);
  log_sum_exp_ = Tensor::zeros({tokens}, statistics_type_, device_);
  if (tp.active()) {
    row_max_ = Tensor::zeros({tokens}, statistics_type_, device_);
    global_max_ = Tensor::zeros({tokens}, statistics_type_, device_);
    shard_sums_ = Tensor::zeros({2, tokens}, statistics_type_, device_);
    sum_exp_ = shard_sums_.view(0, {tokens});
    target_logit_ = shard_sums_.view(tokens, {tokens});
  }
  d_final_norm_ = Tensor::zeros({tokens, hidden}, type_, device_);
  d_final_norm_local_ = sp ? Tensor::zeros({local, hidden}, type_, device_) : d_final_norm_;
  d_residual_ = Tensor::zeros({local, hidden}, type_, device_);
  d_residual_next_ = Tensor::zeros({local, hidden}, type_, device_);
  d_embedded_full_ = sp ? Tensor::zeros({tokens, hidden}, type_, device_) : Tensor();
}

void Transformer::embed(const Tensor& inputs, const DropoutContext& dropout) {
  const TensorParallelism& tp = options_.tensor_parallel;
  Tensor& x = residuals_.front();
  const std::int64_t tokens = batch_ * seq_;
  if (!tp.active()) {
    embedding_forward(inputs, word_embedding_->compute, x);
    if (position_embedding_ != nullptr) {
      Tensor positions = x.reshaped({batch_, seq_, model_.hidden_size});
      position_embedding_forward(position_embedding_->compute, positions);
    }
  } else {
    // Each rank looks up the ids in its rows; the sum over the group is the whole lookup.
    vocab_parallel_embedding_forward(inputs, word_embedding_->compute, vocab_start_,
                                     embedded_full_);
    reduce_sequence(tp, embedded_full_, x);
    if (position_embedding_ != nullptr) {
      position_embedding_forward_rows(position_embedding_->compute, x, seq_,
                                      tp.first_local_token(tokens));
    }
  }
  if (model_.dropout > 0) {
    DropoutKey key = dropout_key(model_, dropout, 0);
    key.first_token += tp.first_local_token(tokens);
    dropout_forward(x, model_.dropout, key, x);
  }
}

// The loss over a vocabulary split across the tp group, without gathering the logits: each rank
// reduces its columns to per-row statistics, and two all-reduces (the maxima, then the rescaled
// sums with the target logits) combine them.
void Transformer::vocab_parallel_loss(const Tensor& targets) {
  Communicator& group = *options_.tensor_parallel.group;
  cross_entropy_shard_statistics(logits_, targets, vocab_start_, row_max_, sum_exp_, target_logit_);
  global_max_.copy_from(row_max_);
  group.all_reduce(global_max_, ReduceOp::max);
  cross_entropy_rescale_shard_sums(row_max_, global_max_, sum_exp_);
  group.all_reduce(shard_sums_, ReduceOp::sum);
  cross_entropy_shard_losses(global_max_, sum_exp_, target_logit_, losses_, log_sum_exp_);
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
  const TensorParallelism& tp = options_.tensor_parallel;
  acquire_values(0);
  embed(inputs, dropout);
  release_values(0);
  for (std::size_t layer = 0; layer < layers_.size(); ++layer) {
    const auto unit = static_cast<std::int64_t>(layer) + 1;
    acquire_values(unit);
    layers_[layer].forward(residuals_[layer], residuals_[layer + 1], batch_, seq_, dropout,
                           scratch_);
    release_values(unit);
  }
  acquire_values(head_unit());
  if (model_.tied_embeddings) acquire_values(0);
  detail::norm_forward(model_.norm, residuals_.back(), final_norm_weight_->compute,
                       final_norm_bias_ ? &final_norm_bias_->compute : nullptr, model_.norm_epsilon,
                       final_norm_local_, final_mean_, final_rstd_);
  gather_sequence(tp, final_norm_local_, final_norm_);
  linear_forward(final_norm_, lm_head_->compute, nullptr, logits_);
  if (tp.active()) {
    vocab_parallel_loss(targets);
  } else {
    cross_entropy_forward(logits_, targets, losses_, log_sum_exp_);
  }
  return sum_of(losses_) / static_cast<double>(losses_.numel());
}

double Transformer::forward_loss(const Tensor& inputs, const Tensor& targets,
                                 const DropoutContext& dropout) {
  const double loss = forward(inputs, targets, dropout);
  if (model_.tied_embeddings) release_values(0);
  release_values(head_unit());
  return loss;
}

void Transformer::embed_backward(const Tensor& inputs, Tensor& d_embedded) {
  const TensorParallelism& tp = options_.tensor_parallel;
  if (!tp.active()) {
    if (position_embedding_ != nullptr) {
      position_embedding_backward(d_embedded.reshaped({batch_, seq_, model_.hidden_size}),
                                  position_embedding_->gradient);
    }
    embedding_backward(inputs, d_embedded, word_embedding_->gradient);
    return;
  }
  const std::int64_t tokens = batch_ * seq_;
  if (position_embedding_ != nullptr) {
    position_embedding_backward_rows(d_embedded, position_embedding_->gradient, seq_,
                                     tp.first_local_token(tokens));
  }
  const Tensor* d_full = &d_embedded;
  if (tp.shards_tokens()) {
    gather_sequence(tp, d_embedded, d_embedded_full_);
    d_full = &d_embedded_full_;
  }
  vocab_parallel_embedding_backward(inputs, *d_full, vocab_start_, word_embedding_->gradient);
}

double Transformer::forward_backward(const Tensor& inputs, const Tensor& targets, double loss_scale,
                                     const DropoutContext& dropout) {
  const double loss = forward(inputs, targets, dropout);
  const TensorParallelism& tp = options_.tensor_parallel;
  // The head's values are still held from the forward; with tied embeddings unit 0's gradient
  // stays acquired until the embedding's own backward has added to it.
  acquire_gradients(head_unit());
  if (model_.tied_embeddings) acquire_gradients(0);
  Tensor& d_logits = logits_;  // overwritten in place
  cross_entropy_backward(logits_, targets, log_sum_exp_, loss_scale, d_logits, vocab_start_);
  d_final_norm_.fill_zero();
  linear_backward(d_logits, final_norm_, lm_head_->compute, &d_final_norm_, lm_head_->gradient,
                  nullptr);
  reduce_sequence(tp, d_final_norm_, d_final_norm_local_);
  d_residual_.fill_zero();
  detail::norm_backward(model_.norm, d_final_norm_local_, residuals_.back(),
                        final_norm_weight_->compute, final_mean_, final_rstd_, d_residual_,
                        final_norm_weight_->gradient,
                        final_norm_bias_ ? &final_norm_bias_->gradient : nullptr);
  release_gradients(head_unit());
  if (model_.tied_embeddings) release_values(0);
  release_values(head_unit());
  for (std::size_t layer = layers_.size(); layer-- > 0;) {
    const auto unit = static_cast<std::int64_t>(layer) + 1;
    acquire_values(unit);
    acquire_gradients(unit);
    d_residual_next_.fill_zero();
    layers_[layer].backward(residuals_[layer], residuals_[layer + 1], d_residual_, d_residual_next_,
                            dropout, scratch_);
    std::swap(d_residual_, d_residual_next_);
    release_gradients(unit);
    release_values(unit);
  }
  acquire_values(0);
  acquire_gradients(0);
  Tensor* d_embedded = &d_residual_;
  if (model_.dropout > 0) {
    d_residual_next_.fill_zero();
    DropoutKey key = dropout_key(model_, dropout, 0);
    key.first_token += tp.first_local_token(batch_ * seq_);
    dropout_backward(d_residual_, model_.dropout, key, d_residual_next_);
    d_embedded = &d_residual_next_;
  }
  embed_backward(inputs, *d_embedded);
  release_gradients(0);
  if (model_.tied_embeddings) release_gradients(0);
  release_values(0);
  return loss;
}

}  // namespace strata::executor
