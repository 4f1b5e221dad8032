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
#include "strata/executor/ops/residual.h"
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
  if (model.mtp) return refuse("/mtp", "multi-token prediction");
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
  layer_slot_.assign(static_cast<std::size_t>(model_.layers_with_mtp()), -1);
  std::size_t held_layers = 0;
  for (const schemas::PipelineStage& stage : stages_) {
    held_layers += static_cast<std::size_t>(stage.num_layers);
    if (stage.lm_head) held_layers += static_cast<std::size_t>(model_.mtp_modules());
  }
  layers_.reserve(held_layers);
  // The main model's layers, then (with the last stage) the MTP modules' layers.
  for (std::int64_t layer = 0; layer < model_.layers_with_mtp(); ++layer) {
    if (!parameters_->contains(fmt::format("layers.{}.attention_norm.weight", layer))) continue;
    layer_slot_[static_cast<std::size_t>(layer)] = static_cast<int>(layers_.size());
    layers_.emplace_back(model_, layer, *parameters_, options_.tensor_parallel,
                         options_.context_parallel, options_.expert_parallel);
    if (layer < model_.num_layers && !options_.recomputed_layers.empty() &&
        options_.recomputed_layers[static_cast<std::size_t>(layer)]) {
      layers_.back().set_recompute(true);
    }
  }
  for (std::int64_t module = 1; module <= model_.mtp_modules(); ++module) {
    if (layer_slot_[static_cast<std::size_t>(model_.num_layers + module - 1)] < 0) break;
    mtp_.emplace_back(model_, module, *parameters_);
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
  if (!mtp_.empty()) {
    for (Tensor* buffer : {&d_carry_, &d_carry_next_, &d_layer_output_, &d_layer_input_,
                           &d_mtp_embedded_, &d_mtp_norm_}) {
      *buffer = Tensor::zeros({local, hidden}, type_, device_);
    }
    d_combined_ = Tensor::zeros({local, 2 * hidden}, type_, device_);
  }
}

namespace {

// The embedding's buffers for `tokens` tokens, `local` of them this rank's.
void allocate_embedding(std::int64_t tokens, std::int64_t local, std::int64_t hidden, bool sp,
                        bool norm, ScalarType type, ScalarType statistics, Device device, Tensor& x,
                        EmbeddingActivations& e) {
  // Without token sharding the lookup writes x itself.
  e.full = sp ? Tensor::zeros({tokens, hidden}, type, device) : x;
  if (norm) {
    e.norm_input = Tensor::zeros({local, hidden}, type, device);
    e.mean = Tensor::zeros({local}, statistics, device);
    e.rstd = Tensor::zeros({local}, statistics, device);
  }
}

void allocate_head(std::int64_t tokens, std::int64_t local, std::int64_t hidden, std::int64_t vocab,
                   bool sp, ScalarType type, ScalarType statistics, Device device,
                   HeadActivations& h) {
  h.norm = Tensor::zeros({tokens, hidden}, type, device);
  h.norm_local = sp ? Tensor::zeros({local, hidden}, type, device) : h.norm;
  h.mean = Tensor::zeros({local}, statistics, device);
  h.rstd = Tensor::zeros({local}, statistics, device);
  // The backward overwrites the logits with their gradient: one [tokens, vocab] buffer, not two.
  h.logits = Tensor::zeros({tokens, vocab}, type, device);
  h.losses = Tensor::zeros({tokens}, statistics, device);
  h.log_sum_exp = Tensor::zeros({tokens}, statistics, device);
}

}  // namespace

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
  const bool norm = embedding_norm_weight_ != nullptr;
  a.inputs = Tensor::zeros({batch, seq}, ScalarType::int32, device_);
  a.targets = Tensor::zeros({(1 + model_.mtp_modules()) * batch, seq}, ScalarType::int32, device_);
  for (std::int64_t i = 0; i <= stage.num_layers; ++i) {
    a.residuals.push_back(Tensor::zeros({local, hidden}, type_, device_));
  }
  a.layers.resize(static_cast<std::size_t>(stage.num_layers));
  if (stage.embedding) {
    allocate_embedding(tokens, local, hidden, sp, norm, type_, statistics_type_, device_,
                       a.residuals.front(), a.embedding);
  }
  if (!stage.embedding) a.d_input = Tensor::zeros({local, hidden}, type_, device_);
  if (stage.lm_head) {
    const std::int64_t vocab = lm_head_->shape[0];  // this rank's rows
    allocate_head(tokens, local, hidden, vocab, sp, type_, statistics_type_, device_, a.head);
    a.mtp.resize(mtp_.size());
    for (MtpActivations& m : a.mtp) {
      m.ids = Tensor::zeros({batch, seq}, ScalarType::int32, device_);
      m.embedded = Tensor::zeros({local, hidden}, type_, device_);
      allocate_embedding(tokens, local, hidden, sp, norm, type_, statistics_type_, device_,
                         m.embedded, m.embedding);
      m.layer_input = Tensor::zeros({local, hidden}, type_, device_);
      m.layer_output = Tensor::zeros({local, hidden}, type_, device_);
      allocate_head(tokens, local, hidden, vocab, sp, type_, statistics_type_, device_, m.head);
    }
  }
}

void Transformer::embed(const Tensor& ids, const DropoutContext& dropout, std::int64_t depth,
                        std::int64_t batch, std::int64_t seq, EmbeddingActivations& e, Tensor& x) {
  const TensorParallelism& tp = options_.tensor_parallel;
  const ContextParallelism& cp = options_.context_parallel;
  const std::int64_t first_row = tp.first_local_token(batch * seq);
  if (!tp.active()) {
    embedding_forward(ids, word_embedding_->compute, x);
  } else {
    // Each rank looks up the ids in its rows; the sum over the group is the whole lookup.
    vocab_parallel_embedding_forward(ids, word_embedding_->compute, vocab_start_, e.full);
    reduce_sequence(tp, e.full, x);
  }
  if (position_embedding_ != nullptr) {
    position_embedding_forward_local(cp, first_row, seq, position_embedding_->compute, x, depth);
  }
  if (embedding_norm_weight_ != nullptr) {
    // BLOOM's word_embeddings_layernorm, on this rank's tokens, before the embedding dropout.
    e.norm_input.copy_from(x);
    detail::norm_forward(model_.norm, e.norm_input, embedding_norm_weight_->compute,
                         embedding_norm_bias_ ? &embedding_norm_bias_->compute : nullptr,
                         model_.norm_epsilon, x, e.mean, e.rstd);
  }
  if (model_.dropout > 0 && dropout.active) {
    dropout_forward_local(cp, first_row, seq, x, model_.dropout,
                          dropout_key(model_, dropout, embedding_site(depth)), x);
  }
}

// The loss over a vocabulary split across the tp group, without gathering the logits: each rank
// reduces its columns to per-row statistics, and two all-reduces (the maxima, then the rescaled
// sums with the target logits) combine them.
void Transformer::vocab_parallel_loss(const Tensor& targets, HeadActivations& h) {
  Communicator& group = *options_.tensor_parallel.group;
  cross_entropy_shard_statistics(h.logits, targets, vocab_start_, row_max_, sum_exp_,
                                 target_logit_);
  global_max_.copy_from(row_max_);
  group.all_reduce(global_max_, ReduceOp::max);
  cross_entropy_rescale_shard_sums(row_max_, global_max_, sum_exp_);
  group.all_reduce(shard_sums_, ReduceOp::sum);
  cross_entropy_shard_losses(global_max_, sum_exp_, target_logit_, h.losses, h.log_sum_exp);
}

Tensor Transformer::labels_at(const StageActivations& a, std::int64_t depth) const {
  return a.targets.view(depth * a.batch * a.seq, {a.batch, a.seq});
}

void Transformer::head_forward(const Tensor& hidden, const ParameterEntry& norm_weight,
                               const ParameterEntry* norm_bias, const Tensor& labels,
                               HeadActivations& h) {
  const TensorParallelism& tp = options_.tensor_parallel;
  detail::norm_forward(model_.norm, hidden, norm_weight.compute,
                       norm_bias ? &norm_bias->compute : nullptr, model_.norm_epsilon, h.norm_local,
                       h.mean, h.rstd);
  gather_sequence(tp, h.norm_local, h.norm);
  linear_forward(h.norm, lm_head_->compute, nullptr, h.logits);
  if (tp.active()) {
    vocab_parallel_loss(labels, h);
  } else {
    cross_entropy_forward(h.logits, labels, h.losses, h.log_sum_exp);
  }
}

void Transformer::head_backward(const Tensor& hidden, ParameterEntry& norm_weight,
                                ParameterEntry* norm_bias, const Tensor& labels, double loss_scale,
                                const std::vector<RowRange>& unlabelled, const Tensor* carry,
                                HeadActivations& h, Tensor& d_hidden) {
  const TensorParallelism& tp = options_.tensor_parallel;
  Tensor& d_logits = h.logits;  // overwritten in place
  cross_entropy_backward(h.logits, labels, h.log_sum_exp, loss_scale, d_logits, vocab_start_);
  const std::int64_t columns = d_logits.size(1);
  for (const RowRange& rows : unlabelled) {
    d_logits.view(rows.row * columns, {rows.count, columns}).fill_zero();  // not scored
  }
  d_final_norm_.fill_zero();
  linear_backward(d_logits, h.norm, lm_head_->compute, &d_final_norm_, lm_head_->gradient, nullptr);
  reduce_sequence(tp, d_final_norm_, d_final_norm_local_);
  if (carry != nullptr) residual_forward(d_final_norm_local_, *carry, d_final_norm_local_);
  detail::norm_backward(model_.norm, d_final_norm_local_, hidden, norm_weight.compute, h.mean,
                        h.rstd, d_hidden, norm_weight.gradient,
                        norm_bias ? &norm_bias->gradient : nullptr);
}

void Transformer::mtp_forward(const DropoutContext& dropout, StageActivations& a) {
  const Tensor* previous = &a.head.norm_local;  // the main model's normalised output
  for (std::size_t j = 0; j < mtp_.size(); ++j) {
    const MtpModule& module = mtp_[j];
    MtpActivations& m = a.mtp[j];
    const auto depth = static_cast<std::int64_t>(j) + 1;
    acquire_values(module.unit());
    // The tokens `depth` places ahead; 0 where the sequence has none (Megatron-Core rolls the
    // token ids and fills zeros), rather than the target one place short of that.
    m.ids.copy_from(labels_at(a, depth - 1));
    for (const RowRange& rows : unlabelled_rows(options_.context_parallel, a.batch, a.seq, depth)) {
      m.ids.view(rows.row, {rows.count}).fill_zero();
    }
    embed(m.ids, dropout, depth, a.batch, a.seq, m.embedding, m.embedded);
    module.input_forward(m.embedded, *previous, m.input, m.layer_input);
    layer_at(module.layer())
        .forward(m.layer_input, m.layer_output, a.batch, a.seq, dropout, scratch_, m.layer);
    head_forward(m.layer_output, module.final_norm_weight(), module.final_norm_bias(),
                 labels_at(a, depth), m.head);
    release_values(module.unit());
    previous = &m.head.norm_local;
  }
}

void Transformer::mtp_backward(const DropoutContext& dropout, double loss_scale,
                               StageActivations& a, Tensor& d_carry, bool split) {
  const ContextParallelism& cp = options_.context_parallel;
  const std::int64_t seq_length = a.seq * cp.size();
  const double modules = static_cast<double>(mtp_.size());
  d_carry.fill_zero();  // nothing flows back into the last module's output but its own loss
  for (std::size_t j = mtp_.size(); j-- > 0;) {
    const MtpModule& module = mtp_[j];
    MtpActivations& m = a.mtp[j];
    const auto depth = static_cast<std::int64_t>(j) + 1;
    acquire_values(module.unit());
    acquire_gradients(module.unit());
    // loss_scale weighs each of a micro-batch's batch·seq_length tokens; module k averages over
    // the batch·(seq_length − k) positions it scores, with weight loss_weight / D.
    const double scale = loss_scale * model_.mtp->loss_weight / modules *
                         static_cast<double>(seq_length) / static_cast<double>(seq_length - depth);
    d_layer_output_.fill_zero();
    head_backward(m.layer_output, module.final_norm_weight(), module.final_norm_bias(),
                  labels_at(a, depth), scale, unlabelled_rows(cp, a.batch, a.seq, depth), &d_carry,
                  m.head, d_layer_output_);
    d_layer_input_.fill_zero();
    layer_at(module.layer())
        .backward(m.layer_input, m.layer_output, d_layer_output_, d_layer_input_, dropout,
                  loss_scale, scratch_, m.layer, split ? &a.deferred : nullptr);
    const Tensor& previous = j == 0 ? a.head.norm_local : a.mtp[j - 1].head.norm_local;
    d_mtp_embedded_.fill_zero();
    d_carry_next_.fill_zero();
    module.input_backward(d_layer_input_, m.embedded, previous, m.input, d_combined_, d_mtp_norm_,
                          d_mtp_embedded_, d_carry_next_);
    std::swap(d_carry, d_carry_next_);
    embed_backward(m.ids, dropout, depth, a.batch, a.seq, d_mtp_embedded_, m.embedding);
    release_gradients(module.unit());
    release_values(module.unit());
  }
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
    embed(a.inputs, dropout, 0, batch, seq, a.embedding, a.residuals.front());
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
  STRATA_CHECK(model_.mtp_modules() < seq * options_.context_parallel.size(),
               "{} MTP modules leave no position of a {}-token sequence scored",
               model_.mtp_modules(), seq * options_.context_parallel.size());
  STRATA_CHECK(targets != nullptr && targets->shape() == a.targets.shape(),
               "the last stage needs labels {} (targets and {} depths ahead)",
               shape_to_string(a.targets.shape()), model_.mtp_modules());
  a.targets.copy_from(*targets);
  const bool uses_embedding = model_.last_stage_uses_word_embedding();
  acquire_values(head_unit());
  if (uses_embedding) acquire_values(0);
  head_forward(a.residuals.back(), *final_norm_weight_, final_norm_bias_, labels_at(a, 0), a.head);
  mtp_forward(dropout, a);
  if (uses_embedding) release_values(0);
  release_values(head_unit());
  return sum_of(a.head.losses) / static_cast<double>(a.head.losses.numel());
}

void Transformer::embed_backward(const Tensor& ids, const DropoutContext& dropout,
                                 std::int64_t depth, std::int64_t batch, std::int64_t seq,
                                 Tensor& d_x, EmbeddingActivations& e) {
  const TensorParallelism& tp = options_.tensor_parallel;
  Tensor* d_embedded = &d_x;
  if (model_.dropout > 0) {
    d_residual_next_.fill_zero();
    dropout_backward_local(options_.context_parallel, tp.first_local_token(batch * seq), seq, d_x,
                           model_.dropout, dropout_key(model_, dropout, embedding_site(depth)),
                           d_residual_next_);
    d_embedded = &d_residual_next_;
  }
  if (embedding_norm_weight_ != nullptr) {
    d_embedding_norm_input_.fill_zero();
    detail::norm_backward(model_.norm, *d_embedded, e.norm_input, embedding_norm_weight_->compute,
                          e.mean, e.rstd, d_embedding_norm_input_, embedding_norm_weight_->gradient,
                          embedding_norm_bias_ ? &embedding_norm_bias_->gradient : nullptr);
    embed_lookup_backward(ids, depth, batch, seq, d_embedding_norm_input_);
    return;
  }
  embed_lookup_backward(ids, depth, batch, seq, *d_embedded);
}

void Transformer::embed_lookup_backward(const Tensor& ids, std::int64_t depth, std::int64_t batch,
                                        std::int64_t seq, Tensor& d_embedded) {
  const TensorParallelism& tp = options_.tensor_parallel;
  if (position_embedding_ != nullptr) {
    position_embedding_backward_local(options_.context_parallel, tp.first_local_token(batch * seq),
                                      seq, d_embedded, position_embedding_->gradient, depth);
  }
  if (!tp.active()) {
    embedding_backward(ids, d_embedded, word_embedding_->gradient);
    return;
  }
  const Tensor* d_full = &d_embedded;
  if (tp.shards_tokens()) {
    gather_sequence(tp, d_embedded, d_embedded_full_);
    d_full = &d_embedded_full_;
  }
  vocab_parallel_embedding_backward(ids, *d_full, vocab_start_, word_embedding_->gradient);
}

void Transformer::stage_backward(int chunk, const Tensor* d_output, double loss_scale,
                                 const DropoutContext& dropout, StageActivations& a, bool split) {
  const schemas::PipelineStage& stage = stages_.at(static_cast<std::size_t>(chunk));
  STRATA_CHECK(a.chunk == chunk, "the backward of stage chunk {} on activations of chunk {}", chunk,
               a.chunk);
  allocate_scratch(a.batch, a.seq);
  const bool uses_embedding = model_.last_stage_uses_word_embedding();
  if (stage.lm_head) {
    // The head's values are needed again; when this stage also uses the word embedding (a tied
    // head, MTP) unit 0's gradient stays acquired until the embedding's own backward (one stage)
    // has added to it.
    acquire_values(head_unit());
    if (uses_embedding) acquire_values(0);
    acquire_gradients(head_unit());
    if (uses_embedding) acquire_gradients(0);
    // The MTP modules first: their gradient of the main head's norm output joins the head's.
    if (!mtp_.empty()) mtp_backward(dropout, loss_scale, a, d_carry_, split);
    d_residual_.fill_zero();
    head_backward(a.residuals.back(), *final_norm_weight_, final_norm_bias_, labels_at(a, 0),
                  loss_scale, {}, mtp_.empty() ? nullptr : &d_carry_, a.head, d_residual_);
    release_gradients(head_unit());
    if (uses_embedding) release_values(0);
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
    if (stage.lm_head && uses_embedding) release_gradients(0);
    return;
  }
  acquire_values(0);
  acquire_gradients(0);
  embed_backward(a.inputs, dropout, 0, a.batch, a.seq, d_residual_, a.embedding);
  release_gradients(0);
  if (stage.lm_head && uses_embedding) release_gradients(0);
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
  if (stage.lm_head) {
    for (const MtpModule& module : mtp_) acquire_gradients(module.unit());
  }
  run_deferred_weight_gradients(a.deferred);
  if (stage.lm_head) {
    for (auto module = mtp_.rbegin(); module != mtp_.rend(); ++module) {
      release_gradients(module->unit());
    }
  }
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
  if (model_.last_stage_uses_word_embedding()) acquire_values(0);
  const auto start = std::chrono::steady_clock::now();
  const double loss = stage_forward(0, inputs.size(0), inputs.size(1), inputs,
                                    &whole_labels(targets), dropout, whole_);
  last_forward_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stage_backward(0, nullptr, loss_scale, dropout, whole_);
  if (model_.last_stage_uses_word_embedding()) release_values(0);
  release_values(head_unit());
  return loss;
}

const Tensor& Transformer::whole_labels(const Tensor& targets) {
  if (!model_.mtp) return targets;
  STRATA_CHECK(!options_.context_parallel.active(),
               "a cp rank's targets cannot be rolled locally: the pipeline runtime stacks them");
  const Shape shape{(1 + model_.mtp_modules()) * targets.size(0), targets.size(1)};
  if (labels_.shape() != shape) labels_ = Tensor::zeros(shape, ScalarType::int32);
  stack_future_labels(targets.to(Device::cpu), model_.mtp_modules(), labels_);
  return labels_;
}

double Transformer::forward_loss(const Tensor& inputs, const Tensor& targets,
                                 const DropoutContext& dropout) {
  STRATA_CHECK(stages_.size() == 1 && stages_.front().embedding && stages_.front().lm_head,
               "forward_loss runs a model held whole");
  STRATA_CHECK(inputs.dim() == 2 && inputs.shape() == targets.shape(),
               "inputs {} and targets {} must both be [batch, seq]",
               shape_to_string(inputs.shape()), shape_to_string(targets.shape()));
  return stage_forward(0, inputs.size(0), inputs.size(1), inputs, &whole_labels(targets), dropout,
                       whole_);
}

Tensor Transformer::forward_logits(const Tensor& inputs) {
  STRATA_CHECK(options_.tensor_parallel.size() == 1, "forward_logits runs on one rank");
  // Any targets do: the loss they give is not used, the logits are what the forward left.
  const Tensor targets = Tensor::zeros(inputs.shape(), ScalarType::int32, device_);
  DropoutContext no_dropout;
  no_dropout.active = false;
  forward_loss(inputs, targets, no_dropout);
  Tensor logits = whole_.head.logits.to(Device::cpu);
  if (logits.scalar_type() == ScalarType::float32) return logits;
  Tensor widened = Tensor::zeros(logits.shape(), ScalarType::float32);
  convert(logits, widened);
  return widened;
}

}  // namespace strata::executor
