// Transformer: a gpt or llama model — embeddings, the layers, the final norm, the LM head (tied or
// not) and the cross-entropy loss — with parameters in one ParameterStore, on one device or as one
// rank of a tensor-parallel group (vocabulary-parallel embedding and loss: no rank gathers the
// logits), whole or as the pipeline stages one pipeline rank holds (its chunks of the plan's
// split: a range of layers, with the embedding on the first stage and the final norm, LM head
// and loss on the last). Used by the training loop, the pipeline runtime, checkpoints and the
// PyTorch reference export.
//
// The stages come from the model description and the plan's split alone: any stage runs its
// layers' forward from the previous stage's activations (or the token ids) and its backward from
// the next stage's gradient (or the loss); nothing is written per model for the pipeline.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/executor/model/context_parallel.h"
#include "strata/executor/model/multi_token_prediction.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/executor/model/parameter_units.h"
#include "strata/executor/model/tensor_parallel.h"
#include "strata/executor/model/transformer_layer.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"

namespace strata::executor {

// What the executor builds from the model format (schemas::executor_model_refusal says what it
// does not, e.g. latent attention): anything else is refused with the field and the reason (an
// InputError naming `source`, e.g. "plan.json" and "/model/mla").
void check_executor_supports(const schemas::ModelConfig& model, const std::string& source,
                             const std::string& json_prefix);

// The first model feature the CUDA backend has no kernels for yet — ALiBi, squared ReLU, an
// embedding norm, a query/key norm, latent attention (their CPU ops are the executor's;
// docs/gpus.md) — as the
// field inside the model object and the rule; nullopt when the model runs on CUDA.
std::optional<schemas::ExecutorRefusal> cuda_model_refusal(const schemas::ModelConfig& model);

// The model's parameter table (transformer_parameters, stage_parameters, stage_units) is
// layout/parameter_table.h's, named here through model/parameter_store.h.

// How a model is built beyond its config: its rank's share of a tensor-parallel group, which flat
// buffers its store leaves to a ZeRO owner, which layers recompute, which stages it holds.
struct TransformerOptions {
  TensorParallelism tensor_parallel;  // one rank by default
  // The cp group: each sequence's chunks this rank holds (context_parallel.h). One rank by default.
  ContextParallelism context_parallel;
  // The ep group: the MoE layers' routed experts this rank holds and whom it sends tokens to
  // (model/moe_mlp.h). One rank by default.
  ExpertParallelism expert_parallel;
  bool own_values = true;     // false under ZeRO-3: values are bound per unit by hooks
  bool own_gradients = true;  // false under ZeRO-2/3
  // False when a checkpoint or an llm.c file fills every value right after construction: drawing
  // 124M random numbers only to overwrite them was most of `--init-llmc`'s start-up.
  bool initialize_values = true;
  // Full recomputation (Megatron's --recompute-method block), by global layer index: these
  // layers keep no activations between forward and backward and rerun their forward before
  // their backward. Empty: none.
  std::vector<bool> recomputed_layers;
  // This rank's pipeline stages (its chunks, in the order its chunks are numbered); empty: the
  // whole model as one stage.
  std::vector<schemas::PipelineStage> stages;
};

// The embedding's state of one micro-batch: the vocab-parallel lookup's partial sums [tokens,
// hidden], and the embedding norm's input [local tokens, hidden] and statistics (BLOOM).
struct EmbeddingActivations {
  Tensor full;
  Tensor norm_input, mean, rstd;
};

// The output head's: the final norm on this rank's tokens and gathered, its statistics, the
// logits (overwritten by their gradient in the backward), the token losses and log-sum-exps.
struct HeadActivations {
  Tensor norm_local, norm, mean, rstd, logits, losses, log_sum_exp;
};

// One MTP module's (model/multi_token_prediction.h), on the last stage.
struct MtpActivations {
  Tensor ids;       // int32 [batch, seq]: the tokens k places ahead (0 past the sequence's end)
  Tensor embedded;  // [local tokens, hidden]: the shared embedding of the tokens k places ahead
  EmbeddingActivations embedding;
  MtpInputActivations input;
  Tensor layer_input, layer_output;  // [local tokens, hidden]
  LayerActivations layer;
  HeadActivations head;
};

// One micro-batch's state on one stage, from its forward to its backward: a pipeline keeps one
// per micro-batch in flight (reused across steps: buffers are allocated once per shape).
struct StageActivations {
  int chunk = -1;
  std::int64_t batch = 0, seq = 0;
  // int32: the first stage's token ids [batch, seq]; the last stage's labels [(1 + D)·batch, seq]
  // (the targets, then with D MTP modules the tokens 1..D further ahead: stack_future_labels).
  Tensor inputs, targets;
  // [stage layers + 1] × [local tokens, hidden]: each layer's input, then the stage's output
  // (what the next stage receives).
  std::vector<Tensor> residuals;
  std::vector<LayerActivations> layers;  // per layer of the stage (unused by recomputing ones)
  EmbeddingActivations embedding;
  HeadActivations head;
  std::vector<MtpActivations> mtp;  // per MTP module, on the last stage
  Tensor d_input;  // ∂loss/∂(stage input) [local tokens, hidden]: what goes back upstream
  DeferredWeightGradients deferred;  // a split backward's W work (zero-bubble schedules)
};

class Transformer {
 public:
  // Parameters are initialised from `seed` (see parameter_init.h). `type` is what the model
  // computes in: float32/float64 on the CPU; float32 or bfloat16 on CUDA, where bfloat16 means
  // mixed precision — float32 master weights, gradients and statistics, a bfloat16 working copy
  // of the weights and bfloat16 activations.
  Transformer(schemas::ModelConfig model, ScalarType type, std::uint64_t seed,
              Device device = Device::cpu, TransformerOptions options = {});
  Transformer(const Transformer&) = delete;  // layers refer to the config and the tp context
  Transformer& operator=(const Transformer&) = delete;

  const schemas::ModelConfig& config() const { return model_; }
  ParameterStore& parameters() { return *parameters_; }
  const ParameterStore& parameters() const { return *parameters_; }
  ScalarType scalar_type() const { return type_; }
  Device device() const { return device_; }
  const TensorParallelism& tensor_parallel() const { return options_.tensor_parallel; }
  const ContextParallelism& context_parallel() const { return options_.context_parallel; }
  // Told when each unit's values and gradients are needed (ZeRO); null: never.
  void set_unit_hooks(ParameterUnitHooks* hooks) { hooks_ = hooks; }

  // The whole model (one stage). inputs and targets are int32 [batch, seq] on the model's device
  // (the whole micro-batch on every rank of a tp group). Returns the mean token loss of this
  // micro-batch and accumulates the gradient of loss_scale·Σ token losses into the parameter
  // store (this rank's part of it: its slices, and for parameters replicated over a
  // token-sharded tp group a partial sum).
  double forward_backward(const Tensor& inputs, const Tensor& targets, double loss_scale,
                          const DropoutContext& dropout);
  // How long forward_backward's last forward took (a trace splits its micro-batch there).
  double last_forward_seconds() const { return last_forward_seconds_; }
  // The same mean loss without backward (dropout, if any, applied with the same masks).
  double forward_loss(const Tensor& inputs, const Tensor& targets, const DropoutContext& dropout);
  // The next-token logits at every position of `inputs` (int32 [batch, seq] on the model's
  // device), without dropout, as float32 [batch·seq, vocab] in host memory: what text generation
  // draws from. A model held whole by one rank (no tp group, one stage).
  Tensor forward_logits(const Tensor& inputs);

  // Pipeline stages. chunk indexes options.stages (0 for the whole model).
  int stage_count() const { return static_cast<int>(stages_.size()); }
  const schemas::PipelineStage& stage(int chunk) const { return stages_.at(chunk); }
  // The parameter units (parameter_units.h) a chunk computes with: what ZeRO-3 gathers for it and
  // whose gradients its backward produces.
  std::vector<std::int64_t> stage_units(int chunk) const;
  // The forward of one micro-batch of batch × seq tokens through chunk `chunk`: `input` is the
  // token ids [batch, seq] on the first stage, else the previous stage's output [local tokens,
  // hidden]; `targets` [batch, seq] is needed on the last stage, which returns the micro-batch's
  // mean token loss (other stages return 0 and leave their output in a.residuals.back()).
  double stage_forward(int chunk, std::int64_t batch, std::int64_t seq, const Tensor& input,
                       const Tensor* targets, const DropoutContext& dropout, StageActivations& a);
  // With D MTP modules the last stage's targets are [(1 + D)·batch, seq] (stack_future_labels
  // over whole sequences, then each rank's cp share), and its backward adds the modules' loss,
  // weighted loss_weight / D, each module's averaged over the positions it scores; the value
  // returned stays the main model's loss (what other trainers log as "lm loss").
  // The backward of that micro-batch: from the loss (scaled by loss_scale) on the last stage,
  // else from d_output, the next stage's gradient of this stage's output. Leaves the gradient of
  // the stage's input in a.d_input (not on the first stage). With `split`, the layers' linear
  // weight gradients wait in a.deferred for stage_backward_weight (zero-bubble I/W).
  void stage_backward(int chunk, const Tensor* d_output, double loss_scale,
                      const DropoutContext& dropout, StageActivations& a, bool split = false);
  // The deferred weight-gradient pass (W) of a split backward.
  void stage_backward_weight(StageActivations& a);

  // Auxiliary-loss-free balancing: each MoE layer this rank holds whose router has an expert
  // bias, with this rank's choices per expert over the micro-batches trained since the last call
  // (cleared). The step moves each bias by expert_bias_step of the loads summed over the ranks
  // that trained the step's tokens (PipelineRuntime, after the optimizer's update).
  struct ExpertBiasLoads {
    ParameterEntry* bias = nullptr;
    std::vector<double> loads;
  };
  std::vector<ExpertBiasLoads> take_expert_bias_loads();

 private:
  // The embedding of ids [batch, seq] into x [local tokens, hidden]: depth 0 the main model's,
  // depth k MTP module k's (learned positions rolled k places, as Megatron-Core rolls them; its
  // own dropout mask).
  void embed(const Tensor& ids, const DropoutContext& dropout, std::int64_t depth,
             std::int64_t batch, std::int64_t seq, EmbeddingActivations& e, Tensor& x);
  // Its backward from d_x, the gradient of x (consumed: dropout's backward may rewrite it).
  void embed_backward(const Tensor& ids, const DropoutContext& dropout, std::int64_t depth,
                      std::int64_t batch, std::int64_t seq, Tensor& d_x, EmbeddingActivations& e);
  // The lookup's and learned positions' backward from the gradient of their sum.
  void embed_lookup_backward(const Tensor& ids, std::int64_t depth, std::int64_t batch,
                             std::int64_t seq, Tensor& d_embedded);
  // Norm, output head and loss of `hidden` [local tokens, hidden] against labels [batch, seq].
  void head_forward(const Tensor& hidden, const ParameterEntry& norm_weight,
                    const ParameterEntry* norm_bias, const Tensor& labels, HeadActivations& h);
  // Its backward: d_hidden (+=) from the loss scaled by loss_scale, the rows `unlabelled` not
  // scored; `carry`, when given, is a further gradient of the norm's output (the next MTP
  // module's hnorm input).
  void head_backward(const Tensor& hidden, ParameterEntry& norm_weight, ParameterEntry* norm_bias,
                     const Tensor& labels, double loss_scale,
                     const std::vector<RowRange>& unlabelled, const Tensor* carry,
                     HeadActivations& h, Tensor& d_hidden);
  void vocab_parallel_loss(const Tensor& targets, HeadActivations& h);
  // The MTP modules after the main head, and their backward before it (on the last stage);
  // d_carry receives the gradient of the main head's norm output.
  void mtp_forward(const DropoutContext& dropout, StageActivations& a);
  // With `split`, the modules' layers leave their linear weight gradients in a.deferred.
  void mtp_backward(const DropoutContext& dropout, double loss_scale, StageActivations& a,
                    Tensor& d_carry, bool split);
  // forward_backward's and forward_loss's labels: targets [batch, seq] themselves, or with MTP
  // stacked with the tokens further ahead (stack_future_labels; whole sequences, no cp).
  const Tensor& whole_labels(const Tensor& targets);
  // Labels at depth k of a.targets: [batch, seq].
  Tensor labels_at(const StageActivations& a, std::int64_t depth) const;
  // The dropout site of depth k's embedding: 0 for the main model's, past every layer's two sites
  // (transformer_layer.cpp: 1 + 2·layer + branch) for the MTP modules'.
  std::uint32_t embedding_site(std::int64_t depth) const {
    return static_cast<std::uint32_t>(depth == 0 ? 0 : 2 * model_.layers_with_mtp() + depth);
  }
  void allocate(int chunk, std::int64_t batch, std::int64_t seq, StageActivations& a);
  void allocate_scratch(std::int64_t batch, std::int64_t seq);
  LayerActivations& layer_activations(std::int64_t layer, StageActivations& a, std::size_t slot) {
    return layer_at(layer).recomputes() ? recomputed_ : a.layers[slot];
  }
  TransformerLayer& layer_at(std::int64_t layer) {
    return layers_[static_cast<std::size_t>(layer_slot_[static_cast<std::size_t>(layer)])];
  }
  std::int64_t head_unit() const { return model_.num_layers + 1; }
  void acquire_values(std::int64_t unit) {
    if (hooks_) hooks_->acquire_values(unit);
  }
  void release_values(std::int64_t unit) {
    if (hooks_) hooks_->release_values(unit);
  }
  void acquire_gradients(std::int64_t unit) {
    if (hooks_) hooks_->acquire_gradients(unit);
  }
  void release_gradients(std::int64_t unit) {
    if (hooks_) hooks_->release_gradients(unit);
  }

  schemas::ModelConfig model_;
  ScalarType type_;
  ScalarType statistics_type_;
  Device device_;
  TransformerOptions options_;
  ParameterUnitHooks* hooks_ = nullptr;
  std::vector<schemas::PipelineStage> stages_;
  std::unique_ptr<ParameterStore> parameters_;
  std::vector<TransformerLayer> layers_;  // the layers this rank holds, in layer order
  std::vector<int> layer_slot_;           // global layer → index in layers_ (−1: not held)
  std::vector<MtpModule> mtp_;            // with the last stage: the MTP modules, in order
  Tensor labels_;                         // forward_backward's stacked labels (with MTP)
  LayerScratch scratch_;
  LayerActivations recomputed_;  // shared by the recomputing layers
  StageActivations whole_;       // forward_backward's one micro-batch
  double last_forward_seconds_ = 0;
  std::int64_t vocab_start_ = 0;  // first vocabulary row of this rank's embedding and LM head
  ParameterEntry* word_embedding_ = nullptr;         // null without the first stage
  ParameterEntry* position_embedding_ = nullptr;     // null without learned positions
  ParameterEntry* embedding_norm_weight_ = nullptr;  // null without an embedding norm
  ParameterEntry* embedding_norm_bias_ = nullptr;
  ParameterEntry* final_norm_weight_ = nullptr;  // these three null without the last stage
  ParameterEntry* final_norm_bias_ = nullptr;
  ParameterEntry* lm_head_ = nullptr;  // the word embedding when tied

  // Transient buffers of one forward or backward, shared by every stage and micro-batch.
  std::int64_t scratch_batch_ = 0, scratch_seq_ = 0;
  // Vocabulary-parallel loss: per-row statistics of this rank's logits; sum_exp and
  // target_logit are the two rows of shard_sums_, all-reduced in one call.
  Tensor row_max_, global_max_, shard_sums_, sum_exp_, target_logit_;
  Tensor d_final_norm_local_, d_final_norm_, d_residual_, d_residual_next_, d_embedded_full_,
      d_embedding_norm_input_;
  // The MTP modules' backward: the gradient carried to the previous module's output, its next
  // value, and the gradients of a module's layer output, layer input, embedding, combined input and
  // of either of its two input norms' outputs.
  Tensor d_carry_, d_carry_next_, d_layer_output_, d_layer_input_, d_mtp_embedded_, d_combined_,
      d_mtp_norm_;
};

}  // namespace strata::executor
