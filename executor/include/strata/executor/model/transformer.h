// Transformer: a whole gpt or llama model on one device — embeddings, the layers, the final norm,
// the LM head (tied or not) and the cross-entropy loss — with parameters in one ParameterStore.
// Used by the training loop, checkpoints and the PyTorch reference export.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/model/transformer_layer.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// What the executor builds from the model format: learned or rotary positions, LayerNorm or
// RMSNorm, GELU or SwiGLU MLPs, any bias flags, tied or untied embeddings, hidden dropout.
// Anything else (ALiBi, squared ReLU, an embedding norm) is refused with the field and the reason
// (an InputError naming `source`, e.g. "plan.json" and "/model/position_embedding").
void check_executor_supports(const schemas::ModelConfig& model, const std::string& source,
                             const std::string& json_prefix);

// Every parameter of the model in store order: embeddings, layers 0..L−1, final norm, LM head.
std::vector<ParameterSpec> transformer_parameters(const schemas::ModelConfig& model);

class Transformer {
 public:
  // Parameters are initialised from `seed` (see parameter_init.h). `type` is what the model
  // computes in: float32/float64 on the CPU; float32 or bfloat16 on CUDA, where bfloat16 means
  // mixed precision — float32 master weights, gradients and statistics, a bfloat16 working copy
  // of the weights and bfloat16 activations.
  Transformer(schemas::ModelConfig model, ScalarType type, std::uint64_t seed,
              Device device = Device::cpu);

  const schemas::ModelConfig& config() const { return model_; }
  ParameterStore& parameters() { return *parameters_; }
  const ParameterStore& parameters() const { return *parameters_; }
  ScalarType scalar_type() const { return type_; }
  Device device() const { return device_; }

  // inputs and targets are int32 [batch, seq] on the model's device. Returns the mean token loss of
  // this micro-batch and accumulates the gradient of loss_scale·Σ token losses into the parameter
  // store.
  double forward_backward(const Tensor& inputs, const Tensor& targets, double loss_scale,
                          const DropoutContext& dropout);
  // The same mean loss without backward (dropout, if any, applied with the same masks).
  double forward_loss(const Tensor& inputs, const Tensor& targets, const DropoutContext& dropout);

 private:
  double forward(const Tensor& inputs, const Tensor& targets, const DropoutContext& dropout);
  void allocate(std::int64_t batch, std::int64_t seq);

  schemas::ModelConfig model_;
  ScalarType type_;
  ScalarType statistics_type_;
  Device device_;
  std::unique_ptr<ParameterStore> parameters_;
  std::vector<TransformerLayer> layers_;
  LayerScratch scratch_;
  ParameterEntry* word_embedding_;
  ParameterEntry* position_embedding_;  // null without learned positions
  ParameterEntry* final_norm_weight_;
  ParameterEntry* final_norm_bias_;
  ParameterEntry* lm_head_;  // the word embedding when tied

  std::int64_t batch_ = 0, seq_ = 0;
  std::vector<Tensor> residuals_;  // [layers + 1] × [batch, seq, hidden]: each layer's input
  Tensor final_norm_, final_mean_, final_rstd_, logits_, losses_, log_sum_exp_;
  Tensor d_final_norm_, d_residual_, d_residual_next_;
};

}  // namespace strata::executor
