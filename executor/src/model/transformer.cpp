#include "strata/executor/model/transformer.h"

#include <fmt/format.h>

#include <chrono>

#include "norm_dispatch.h"
#include "strata/executor/ops/convert.h"
#include "strata/executor/ops/cross_entropy.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/ops/embedding.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/position_embedding.h"
#include "strata/executor/ops/reduction.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/input_error.h"

namespace strata::executor {

using schemas::ModelConfig;

void check_executor_supports(const ModelConfig& model, const std::string& source,
                             const std::string& json_prefix) {
  if (std::optional<schemas::ExecutorRefusal> refusal = schemas::executor_model_refusal(model)) {
    throw schemas::InputError(source, json_prefix + refusal->json_path, std::move(refusal->rule));
  }
}

std::optional<schemas::ExecutorRefusal> cuda_model_refusal(const ModelConfig& model) {
  const auto refuse = [](const char* path, std::string what) {
    return schemas::ExecutorRefusal{
        path, fmt::format("the CUDA backend has no kernels for {} yet; it trains on the CPU "
                          "(--device cpu)",
                          what)};
  };
  if (model.position_embedding == schemas::PositionEmbedding::alibi) {
    return refuse("/position_embedding", "ALiBi");
  }
  if (model.mlp_activation == schemas::MlpActivation::squared_relu) {
    return refuse("/mlp_activation", "squared ReLU");
  }
  if (model.mlp_activation == schemas::MlpActivation::clamped_swiglu) {
    return refuse("/mlp_activation", "the clamped SwiGLU");
  }
  if (model.sliding_window) return refuse("/sliding_window", "sliding-window attention");
  if (model.attention_sinks) return refuse("/attention_sinks", "attention sinks");
  if (model.embedding_norm) return refuse("/embedding_norm", "an embedding norm");
  if (model.qk_norm) return refuse("/qk_norm", "query/key norms");
  if (model.mla) return refuse("/mla", "latent attention");
  return std::nullopt;
}

Transformer::Transformer(ModelConfig model, ScalarType type, std::uint64_t seed, Device device,
                         TransformerOptions options)
    : model_(std::move(model)),
      type_(type),
      statistics_type_(type == ScalarType::bfloat16 ? ScalarType::float32 : type),
      device_(device),
      options_(std::move(options)) {
  check_executor_supports(model_, fmt::format("model {}", model_.name), "");
  if (device_ == Device::cuda) {
    if (std::optional<schemas::ExecutorRefusal> refusal = cuda_model_refusal(model_)) {
      throw schemas::InputError(fmt::format("model {}", model_.name), refusal->json_path,
                                std::move(refusal->rule));
    }
  }
  const TensorParallelism& tp = options_.tensor_parallel;
  STRATA_CHECK(
      options_.recomputed_layers.empty() ||
          static_cast<std::int64_t>(options_.recomputed_layers.size()) == model_.num_layers,
      "recomputation flags for {} layers of {}", options_.recomputed_layers.size(),
      model_.num_layers);
  stages_ = options_.stages;
  if (stages_.empty()) stages_.push_back({0, model_.num_layers, true, true});
  // bfloat16 computes with a working copy of float32 masters (and float32 gradients).
  parameters_ = std::make_unique<ParameterStore>(
      stage_parameters(model_, stages_), statistics_type_, device_, type_,
      StoreOptions{tp.rank(), tp.size(), options_.own_values, options_.own_gradients,
                   options_.expert_parallel.rank(), options_.expert_parallel.size(),
                   options_.expert_parallel.width_rank(), options_.expert_parallel.width_size()});
  if (options_.own_values && options_.initialize_values) parameters_->initialize(seed);
  layer_slot_.assign(static_cast<std::size_t>(model_.num_layers), -1);
  std::size_t held_layers = 0;
  for (const schemas::PipelineStage& stage : stages_) {
    held_layers += static_cast<std::size_t>(stage.num_layers);
  }
  layers_.reserve(held_layers);
  for (std::int64_t layer = 0; layer < model_.num_layers; ++layer) {
    if (!parameters_->contains(fmt::format("layers.{}.attention_norm.weight", layer))) continue;
    layer_slot_[static_cast<std::size_t>(layer)] = static_cast<int>(layers_.size());
    layers_.emplace_back(model_, layer, *parameters_, options_.tensor_parallel,
                         options_.context_parallel, options_.expert_parallel);
    if (!options_.recomputed_layers.empty() &&
        options_.recomputed_layers[static_cast<std::size_t>(layer)]) {
      layers_.back().set_recompute(true);
    }
  }
  const auto optional = [&](const char* name) {
    return parameters_->contains(name) ? &parameters_->entry(name) : nullptr;
  };
  word_embedding_ = optional("embedding.word");
  position_embedding_ = optional("embedding.position");
  embedding_norm_weight_ = optional("embedding.norm.weight");
  embedding_norm_bias_ = optional("embedding.norm.bias");
  final_norm_weight_ = optional("final_norm.weight");
  final_norm_bias_ = optional("final_norm.bias");
  const bool has_head = final_norm_weight_ != nullptr;
  lm_head_ = !has_head                ? nullptr
             : model_.tied_embeddings ? word_embedding_
                                      : optional("lm_head.weight");
  const ParameterEntry* vocabulary = word_embedding_ ? word_embedding_ : lm_head_;
  if (vocabulary != nullptr) {
    vocab_start_ = vocabulary->runs.front().global_offset / model_.hidden_size;
  }
}

std::vector<std::int64_t> Transformer::stage_units(int chunk) const {
  return layout::stage_units(model_, stages_.at(static_cast<std::size_t>(chunk)));
}

void Transformer::allocate_scratch(std::int64_t batch, std::int64_t seq) {
  if (batch == scratch_batch_ && seq == scratch_seq_) return;
  const TensorParallelism& tp = options_.tensor_parallel;
  STRATA_CHECK(!tp.shards_tokens() || (batch * seq) % tp.size() == 0,
               "sequence parallelism splits {} tokens over {} ranks", batch * seq, tp.size());
  scratch_batch_ = batch;
  scratch_seq_ = seq;
  const std::int64_t tokens = batch * seq;
  const std::int64_t local = tp.local_tokens(tokens);
  const std::int64_t hidden = model_.hidden_size;
  const bool sp = tp.shards_tokens();
  if (tp.active() && lm_head_ != nullptr) {
    row_max_ = Tensor::zeros({tokens}, statistics_type_, device_);
    global_max_ = Tensor::zeros({tokens}, statistics_type_, device_);
    shard_sums_ = Tensor::zeros({2, tokens}, statistics_type_, device_);
    sum_exp_ = shard_sums_.view(0, {tokens});
    target_logit_ = shard_sums_.view(tokens, {tokens});
  }
  d_final_norm_ = lm_head_ ? Tensor::zeros({tokens, hidden}, type_, device_) : Tensor();
  d_final_norm_local_ =
      lm_head_ && sp ? Tensor::zeros({local, hidden}, type_, device_) : d_final_norm_;
  d_residual_ = Tensor::zeros({local, hidden}, type_, device_);
  d_residual_next_ = Tensor::zeros({local, hidden}, type_, device_);
  d_embedded_full_ =
      word_embedding_ && sp ? Tensor::zeros({tokens, hidden}, type_, device_) : Tensor();
  d_embedding_norm_input_ =
      embedding_norm_weight_ ? Tensor::zeros({local, hidden}, type_, device_) : Tensor();
}

void Transformer::allocate(int chunk, std::int64_t batch, std::int64_t seq, StageActivations& a) {
  allocate_scratch(batch, seq);
  const schemas::PipelineStage& stage = stages_.at(static_cast<std::size_t>(chunk));
  const TensorParallelism& tp = options_.tensor_parallel;
  if (a.chunk == chunk && a.batch == batch && a.seq == seq) {
    // A pipeline hands the last backward's d_input over to its send upstream: a fresh one.
    if (!stage.embedding && a.d_input.numel() == 0) {
      a.d_input = Tensor::zeros({tp.local_tokens(batch * seq), model_.hidden_size}, type_, device_);
    }
    return;
  }
  a = StageActivations{};
  a.chunk = chunk;
  a.batch = batch;
  a.seq = seq;
  const std::int64_t tokens = batch * seq;
  const std::int64_t local = tp.local_tokens(tokens);
  const std::int64_t hidden = model_.hidden_size;
  const bool sp = tp.shards_tokens();
  a.inputs = Tensor::zeros({batch, seq}, ScalarType::int32, device_);
  a.targets = Tensor::zeros({batch, seq}, ScalarType::int32, device_);
  for (std::int64_t i = 0; i <= stage.num_layers; ++i) {
    a.residuals.push_back(Tensor::zeros({local, hidden}, type_, device_));
  }
  a.layers.resize(static_cast<std::size_t>(stage.num_layers));
  // Without token sharding the full-token tensors are the local ones.
  if (stage.embedding) {
    a.embedded_full = sp ? Tensor::zeros({tokens, hidden}, type_, device_) : a.residuals.front();
    if (embedding_norm_weight_ != nullptr) {
      a.embedding_norm_input = Tensor::zeros({local, hidden}, type_, device_);
      a.embedding_mean = Tensor::zeros({local}, statistics_type_, device_);
      a.embedding_rstd = Tensor::zeros({local}, statistics_type_, device_);
    }
  }
  if (!stage.embedding) a.d_input = Tensor::zeros({local, hidden}, type_, device_);
  if (stage.lm_head) {
    const std::int64_t vocab = lm_head_->shape[0];  // this rank's rows
    a.final_norm = Tensor::zeros({tokens, hidden}, type_, device_);
    a.final_norm_local = sp ? Tensor::zeros({local, hidden}, type_, device_) : a.final_norm;
    a.final_mean = Tensor::zeros({local}, statistics_type_, device_);
    a.final_rstd = Tensor::zeros({local}, statistics_type_, device_);
    // The backward overwrites the logits with their gradient: one [tokens, vocab] buffer, not two.
    a.logits = Tensor::zeros({tokens, vocab}, type_, device_);
    a.losses = Tensor::zeros({tokens}, statistics_type_, device_);
    a.log_sum_exp = Tensor::zeros({tokens}, statistics_type_, device_);
  }
}

void Transformer::embed(const Tensor& inputs, const DropoutContext& dropout, StageActivations& a) {
  const TensorParallelism& tp = options_.tensor_parallel;
  const ContextParallelism& cp = options_.context_parallel;
  Tensor& x = a.residuals.front();
  const std::int64_t first_row = tp.first_local_token(a.batch * a.seq);
  if (!tp.active()) {
    embedding_forward(inputs, word_embedding_->compute, x);
  } else {
    // Each rank looks up the ids in its rows; the sum over the group is the whole lookup.
    vocab_parallel_embedding_forward(inputs, word_embedding_->compute, vocab_start_,
                                     a.embedded_full);
    reduce_sequence(tp, a.embedded_full, x);
  }
  if (position_embedding_ != nullptr) {
    position_embedding_forward_local(cp, first_row, a.seq, position_embedding_->compute, x);
  }
  if (embedding_norm_weight_ != nullptr) {
    // BLOOM's word_embeddings_layernorm, on this rank's tokens, before the embedding dropout.
    a.embedding_norm_input.copy_from(x);
    detail::norm_forward(model_.norm, a.embedding_norm_input, embedding_norm_weight_->compute,
                         embedding_norm_bias_ ? &embedding_norm_bias_->compute : nullptr,
                         model_.norm_epsilon, x, a.embedding_mean, a.embedding_rstd);
  }
  if (model_.dropout > 0 && dropout.active) {
    dropout_forward_local(cp, first_row, a.seq, x, model_.dropout, dropout_key(model_, dropout, 0),
                          x);
  }
}

// The loss over a vocabulary split across the tp group, without gathering the logits: each rank
// reduces its columns to per-row statistics, and two all-reduces (the maxima, then the rescaled
// sums with the target logits) combine them.
void Transformer::vocab_parallel_loss(const Tensor& targets, StageActivations& a) {
  Communicator& group = *options_.tensor_parallel.group;
  cross_entropy_shard_statistics(a.logits, targets, vocab_start_, row_max_, sum_exp_,
                                 target_logit_);
  global_max_.copy_from(row_max_);
  group.all_reduce(global_max_, ReduceOp::max);
  cross_entropy_rescale_shard_sums(row_max_, global_max_, sum_exp_);
  group.all_reduce(shard_sums_, ReduceOp::sum);
  cross_entropy_shard_losses(global_max_, sum_exp_, target_logit_, a.losses, a.log_sum_exp);
}

double Transformer::stage_forward(int chunk, std::int64_t batch, std::int64_t seq,
                                  const Tensor& input, const Tensor* targets,
                                  const DropoutContext& dropout, StageActivations& a) {
  const schemas::PipelineStage& stage = stages_.at(static_cast<std::size_t>(chunk));
  STRATA_CHECK(seq <= model_.max_seq_length, "sequence {} longer than the model's {}", seq,
               model_.max_seq_length);
  STRATA_CHECK(input.device() == device_, "input on {} for a model on {}",
               device_name(input.device()), device_name(device_));
  allocate(chunk, batch, seq, a);
  if (stage.embedding) {
    STRATA_CHECK(input.shape() == Shape({batch, seq}), "token ids {} for a micro-batch of {}×{}",
                 shape_to_string(input.shape()), batch, seq);
    a.inputs.copy_from(input);
    acquire_values(0);
    embed(a.inputs, dropout, a);
    release_values(0);
  } else {
    STRATA_CHECK(input.numel() == a.residuals.front().numel(),
                 "stage {} received {} values for [{} tokens, {}]", chunk, input.numel(),
                 a.residuals.front().size(0), model_.hidden_size);
    a.residuals.front().copy_from(input);
  }
  for (std::int64_t i = 0; i < stage.num_layers; ++i) {
    const std::int64_t layer = stage.first_layer + i;
    const auto slot = static_cast<std::size_t>(i);
    acquire_values(layer + 1);
    layer_at(layer).forward(a.residuals[slot], a.residuals[slot + 1], batch, seq, dropout, scratch_,
                            layer_activations(layer, a, slot));
    release_values(layer + 1);
  }
  if (!stage.lm_head) return 0;
  STRATA_CHECK(targets != nullptr && targets->shape() == Shape({batch, seq}),
               "the last stage needs targets [{}, {}]", batch, seq);
  a.targets.copy_from(*targets);
  const TensorParallelism& tp = options_.tensor_parallel;
  acquire_values(head_unit());
  if (model_.tied_embeddings) acquire_values(0);
  detail::norm_forward(model_.norm, a.residuals.back(), final_norm_weight_->compute,
                       final_norm_bias_ ? &final_norm_bias_->compute : nullptr, model_.norm_epsilon,
                       a.final_norm_local, a.final_mean, a.final_rstd);
  gather_sequence(tp, a.final_norm_local, a.final_norm);
  linear_forward(a.final_norm, lm_head_->compute, nullptr, a.logits);
  if (model_.tied_embeddings) release_values(0);
  release_values(head_unit());
  if (tp.active()) {
    vocab_parallel_loss(a.targets, a);
  } else {
    cross_entropy_forward(a.logits, a.targets, a.losses, a.log_sum_exp);
  }
  return sum_of(a.losses) / static_cast<double>(a.losses.numel());
}

void Transformer::embed_backward(const Tensor& inputs, Tensor& d_embedded, StageActivations& a) {
  if (embedding_norm_weight_ != nullptr) {
    d_embedding_norm_input_.fill_zero();
    detail::norm_backward(model_.norm, d_embedded, a.embedding_norm_input,
                          embedding_norm_weight_->compute, a.embedding_mean, a.embedding_rstd,
                          d_embedding_norm_input_, embedding_norm_weight_->gradient,
                          embedding_norm_bias_ ? &embedding_norm_bias_->gradient : nullptr);
    embed_lookup_backward(inputs, d_embedding_norm_input_, a);
    return;
  }
  embed_lookup_backward(inputs, d_embedded, a);
}

void Transformer::embed_lookup_backward(const Tensor& inputs, Tensor& d_embedded,
                                        StageActivations& a) {
  const TensorParallelism& tp = options_.tensor_parallel;
  if (position_embedding_ != nullptr) {
    position_embedding_backward_local(options_.context_parallel,
                                      tp.first_local_token(a.batch * a.seq), a.seq, d_embedded,
                                      position_embedding_->gradient);
  }
  if (!tp.active()) {
    embedding_backward(inputs, d_embedded, word_embedding_->gradient);
    return;
  }
  const Tensor* d_full = &d_embedded;
  if (tp.shards_tokens()) {
    gather_sequence(tp, d_embedded, d_embedded_full_);
    d_full = &d_embedded_full_;
  }
  vocab_parallel_embedding_backward(inputs, *d_full, vocab_start_, word_embedding_->gradient);
}

void Transformer::stage_backward(int chunk, const Tensor* d_output, double loss_scale,
                                 const DropoutContext& dropout, StageActivations& a, bool split) {
  const schemas::PipelineStage& stage = stages_.at(static_cast<std::size_t>(chunk));
  STRATA_CHECK(a.chunk == chunk, "the backward of stage chunk {} on activations of chunk {}", chunk,
               a.chunk);
  allocate_scratch(a.batch, a.seq);
  const TensorParallelism& tp = options_.tensor_parallel;
  if (stage.lm_head) {
    // The head's values are needed again; with tied embeddings unit 0's gradient stays acquired
    // until the embedding's own backward (one stage) has added to it.
    acquire_values(head_unit());
    if (model_.tied_embeddings) acquire_values(0);
    acquire_gradients(head_unit());
    if (model_.tied_embeddings) acquire_gradients(0);
    Tensor& d_logits = a.logits;  // overwritten in place
    cross_entropy_backward(a.logits, a.targets, a.log_sum_exp, loss_scale, d_logits, vocab_start_);
    d_final_norm_.fill_zero();
    linear_backward(d_logits, a.final_norm, lm_head_->compute, &d_final_norm_, lm_head_->gradient,
                    nullptr);
    reduce_sequence(tp, d_final_norm_, d_final_norm_local_);
    d_residual_.fill_zero();
    detail::norm_backward(model_.norm, d_final_norm_local_, a.residuals.back(),
                          final_norm_weight_->compute, a.final_mean, a.final_rstd, d_residual_,
                          final_norm_weight_->gradient,
                          final_norm_bias_ ? &final_norm_bias_->gradient : nullptr);
    release_gradients(head_unit());
    if (model_.tied_embeddings) release_values(0);
    release_values(head_unit());
  } else {
    STRATA_CHECK(d_output != nullptr && d_output->numel() == d_residual_.numel(),
                 "stage chunk {} needs the gradient of its output", chunk);
    d_residual_.copy_from(*d_output);
  }
  for (std::int64_t i = stage.num_layers; i-- > 0;) {
    const std::int64_t layer = stage.first_layer + i;
    const auto slot = static_cast<std::size_t>(i);
    acquire_values(layer + 1);
    acquire_gradients(layer + 1);
    d_residual_next_.fill_zero();
    layer_at(layer).backward(a.residuals[slot], a.residuals[slot + 1], d_residual_,
                             d_residual_next_, dropout, loss_scale, scratch_,
                             layer_activations(layer, a, slot), split ? &a.deferred : nullptr);
    std::swap(d_residual_, d_residual_next_);
    release_gradients(layer + 1);
    release_values(layer + 1);
  }
  if (!stage.embedding) {
    a.d_input.copy_from(d_residual_);
    if (stage.lm_head && model_.tied_embeddings) release_gradients(0);
    return;
  }
  acquire_values(0);
  acquire_gradients(0);
  Tensor* d_embedded = &d_residual_;
  if (model_.dropout > 0) {
    d_residual_next_.fill_zero();
    dropout_backward_local(options_.context_parallel, tp.first_local_token(a.batch * a.seq), a.seq,
                           d_residual_, model_.dropout, dropout_key(model_, dropout, 0),
                           d_residual_next_);
    d_embedded = &d_residual_next_;
  }
  embed_backward(a.inputs, *d_embedded, a);
  release_gradients(0);
  if (stage.lm_head && model_.tied_embeddings) release_gradients(0);
  release_values(0);
}

std::vector<Transformer::ExpertBiasLoads> Transformer::take_expert_bias_loads() {
  std::vector<ExpertBiasLoads> layers;
  for (TransformerLayer& layer : layers_) {
    MoeMlp* moe = layer.moe();
    if (moe == nullptr || moe->expert_bias() == nullptr) continue;
    layers.push_back({moe->expert_bias(), moe->take_step_loads()});
  }
  return layers;
}

void Transformer::stage_backward_weight(StageActivations& a) {
  const schemas::PipelineStage& stage = stages_.at(static_cast<std::size_t>(a.chunk));
  // The units' gradients are bound for the pass (ZeRO-2/3); values are not needed.
  for (std::int64_t l = stage.first_layer; l < stage.first_layer + stage.num_layers; ++l) {
    acquire_gradients(l + 1);
  }
  run_deferred_weight_gradients(a.deferred);
  for (std::int64_t l = stage.first_layer + stage.num_layers; l-- > stage.first_layer;) {
    release_gradients(l + 1);
  }
}

double Transformer::forward_backward(const Tensor& inputs, const Tensor& targets, double loss_scale,
                                     const DropoutContext& dropout) {
  STRATA_CHECK(stages_.size() == 1 && stages_.front().embedding && stages_.front().lm_head,
               "forward_backward runs a model held whole");
  STRATA_CHECK(inputs.dim() == 2 && inputs.shape() == targets.shape(),
               "inputs {} and targets {} must both be [batch, seq]",
               shape_to_string(inputs.shape()), shape_to_string(targets.shape()));
  // The head's values stay gathered (ZeRO-3) from the forward into the backward.
  acquire_values(head_unit());
  if (model_.tied_embeddings) acquire_values(0);
  const auto start = std::chrono::steady_clock::now();
  const double loss =
      stage_forward(0, inputs.size(0), inputs.size(1), inputs, &targets, dropout, whole_);
  last_forward_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stage_backward(0, nullptr, loss_scale, dropout, whole_);
  if (model_.tied_embeddings) release_values(0);
  release_values(head_unit());
  return loss;
}

double Transformer::forward_loss(const Tensor& inputs, const Tensor& targets,
                                 const DropoutContext& dropout) {
  STRATA_CHECK(stages_.size() == 1 && stages_.front().embedding && stages_.front().lm_head,
               "forward_loss runs a model held whole");
  STRATA_CHECK(inputs.dim() == 2 && inputs.shape() == targets.shape(),
               "inputs {} and targets {} must both be [batch, seq]",
               shape_to_string(inputs.shape()), shape_to_string(targets.shape()));
  return stage_forward(0, inputs.size(0), inputs.size(1), inputs, &targets, dropout, whole_);
}

Tensor Transformer::forward_logits(const Tensor& inputs) {
  STRATA_CHECK(options_.tensor_parallel.size() == 1, "forward_logits runs on one rank");
  // Any targets do: the loss they give is not used, the logits are what the forward left.
  const Tensor targets = Tensor::zeros(inputs.shape(), ScalarType::int32, device_);
  DropoutContext no_dropout;
  no_dropout.active = false;
  forward_loss(inputs, targets, no_dropout);
  Tensor logits = whole_.logits.to(Device::cpu);
  if (logits.scalar_type() == ScalarType::float32) return logits;
  Tensor widened = Tensor::zeros(logits.shape(), ScalarType::float32);
  convert(logits, widened);
  return widened;
}

}  // namespace strata::executor
