// Transformer: a whole gpt or llama model — embeddings, the layers, the final norm, the LM head
// (tied or not) and the cross-entropy loss — with parameters in one ParameterStore, on one device
// or as one rank of a tensor-parallel group (vocabulary-parallel embedding and loss: no rank
// gathers the logits). Used by the training loop, checkpoints and the PyTorch reference export.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/model/parameter_units.h"
#include "strata/executor/model/tensor_parallel.h"
#include "strata/executor/model/transformer_layer.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// What the executor builds from the model format: learned or rotary positions, LayerNorm or
// RMSNorm, GELU or SwiGLU MLPs, any bias flags, tied or untied embeddings, hidden dropout.
// Anything else (ALiBi, squared ReLU, an embedding norm) is refused with the field and the reason
// (an InputError naming `source`, e.g. "plan.json" and "/model/position_embedding").
void check_executor_supports(const schemas::ModelConfig& model, const std::string& source,
                             const std::string& json_prefix);

// Every parameter of the model in store order — embeddings, layers 0..L−1, final norm, LM head —
// with its tensor-parallel placement: the model's placement table. The word embedding and LM
// head split the vocabulary (unevenly when tp does not divide it), the layers as
// transformer_layer_parameters says; norms and the position embedding are replicated.
std::vector<ParameterSpec> transformer_parameters(const schemas::ModelConfig& model);

// How a model is built beyond its config: its rank's share of a tensor-parallel group, which flat
// buffers its store leaves to a ZeRO owner, and which layers recompute.
struct TransformerOptions {
  TensorParallelism tensor_parallel;  // one rank by default
  bool own_values = true;             // false under ZeRO-3: values are bound per unit by hooks
  bool own_gradients = true;          // false under ZeRO-2/3
  // Full recomputation of the first N layers (Megatron's --recompute-method block): they keep
  // no activations between forward and backward and rerun their forward before their backward.
  std::int64_t recomputed_layers = 0;
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
  // Told when each unit's values and gradients are needed (ZeRO); null: never.
  void set_unit_hooks(ParameterUnitHooks* hooks) { hooks_ = hooks; }

  // inputs and targets are int32 [batch, seq] on the model's device (the whole micro-batch on
  // every rank of a tp group). Returns the mean token loss of this micro-batch and accumulates the
  // gradient of loss_scale·Σ token losses into the parameter store (this rank's part of it: its
  // slices, and for parameters replicated over a token-sharded tp group a partial sum).
  double forward_backward(const Tensor& inputs, const Tensor& targets, double loss_scale,
                          const DropoutContext& dropout);
  // The same mean loss without backward (dropout, if any, applied with the same masks).
  double forward_loss(const Tensor& inputs, const Tensor& targets, const DropoutContext& dropout);

 private:
  double forward(const Tensor& inputs, const Tensor& targets, const DropoutContext& dropout);
  void embed(const Tensor& inputs, const DropoutContext& dropout);
  void embed_backward(const Tensor& inputs, Tensor& d_embedded);
  void vocab_parallel_loss(const Tensor& targets);
  void allocate(std::int64_t batch, std::int64_t seq);
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
  std::unique_ptr<ParameterStore> parameters_;
  std::vector<TransformerLayer> layers_;
  LayerScratch scratch_;
  LayerActivations recomputed_;   // shared by the recomputing layers
  std::int64_t vocab_start_ = 0;  // first vocabulary row of this rank's embedding and LM head
  ParameterEntry* word_embedding_;
  ParameterEntry* position_embedding_;  // null without learned positions
  ParameterEntry* final_norm_weight_;
  ParameterEntry* final_norm_bias_;
  ParameterEntry* lm_head_;  // the word embedding when tied

  std::int64_t batch_ = 0, seq_ = 0;
  // [layers + 1] × [local tokens, hidden]: each layer's input (this rank's tokens under SP).
  std::vector<Tensor> residuals_;
  Tensor embedded_full_;  // the vocab-parallel lookup's partial sums [tokens, hidden]
  Tensor final_norm_local_, final_norm_, final_mean_, final_rstd_, logits_, losses_, log_sum_exp_;
  // Vocabulary-parallel loss: per-row statistics of this rank's logits; sum_exp and
  // target_logit are the two rows of shard_sums_, all-reduced in one call.
  Tensor row_max_, global_max_, shard_sums_, sum_exp_, target_logit_;
  Tensor d_final_norm_local_, d_final_norm_, d_residual_, d_residual_next_, d_embedded_full_;
};

}  // namespace strata::executor
