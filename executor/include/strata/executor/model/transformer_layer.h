// TransformerLayer: one pre-norm decoder layer (gpt or llama), its forward pass storing what
// backward needs and its explicit backward pass. Used by Transformer, one per layer.
//
//   x ─┬─ norm ─ qkv ─(rotary)─ causal attention ─ output proj ─ dropout ─(+)─┬─ norm ─ MLP ─
//   dropout ─(+)─ out
//      └──────────────────────────────────────────────────────────────────────┘
//      └─────────────────────┘
//   MLP: gpt = fc ─ GELU ─ output;  llama = (gate, up) ─ SwiGLU ─ output
#pragma once

#include <cstdint>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/ops/dropout.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// Where in the step a micro-batch's dropout masks come from (see ops/dropout.h).
struct DropoutContext {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::int64_t first_token = 0;  // global index of the micro-batch's first token in the step
};

// The mask key of dropout site `site` (0: after the embedding; 1 + 2l and 2 + 2l: layer l's
// attention and MLP branches) for a micro-batch's [tokens, hidden] activations.
DropoutKey dropout_key(const schemas::ModelConfig& model, const DropoutContext& context,
                       std::uint32_t site);

// The parameter names of layer `index`, in the order the ParameterStore lays them out.
std::vector<ParameterSpec> transformer_layer_parameters(const schemas::ModelConfig& model,
                                                        std::int64_t index);

// Per-micro-batch buffers shared by all layers (the backward scratch), sized for [batch, seq].
struct LayerScratch {
  Tensor d_norm, d_attention, d_qkv, d_hidden, d_gate, d_up, d_middle, d_attention_branch;
  void resize(const schemas::ModelConfig& model, std::int64_t tokens, ScalarType type,
              Device device);
};

class TransformerLayer {
 public:
  TransformerLayer(const schemas::ModelConfig& model, std::int64_t index, ParameterStore& store);

  // out = layer(x) for x, out [batch, seq, hidden]; keeps the activations backward needs.
  void forward(const Tensor& x, Tensor& out, const DropoutContext& dropout);
  // dx += ∂loss/∂x given d_out; parameter gradients accumulate in the store.
  void backward(const Tensor& x, const Tensor& d_out, Tensor& dx, const DropoutContext& dropout,
                LayerScratch& scratch);

 private:
  void allocate(std::int64_t batch, std::int64_t seq, ScalarType type, Device device);
  std::uint32_t dropout_site(int branch) const;

  const schemas::ModelConfig& model_;
  std::int64_t index_;
  AttentionShape shape_;
  bool llama_mlp_;
  ParameterEntry* attention_norm_weight_;
  ParameterEntry* attention_norm_bias_;
  ParameterEntry* qkv_weight_;
  ParameterEntry* qkv_bias_;
  ParameterEntry* attention_output_weight_;
  ParameterEntry* attention_output_bias_;
  ParameterEntry* mlp_norm_weight_;
  ParameterEntry* mlp_norm_bias_;
  ParameterEntry* mlp_in_weight_;  // gpt: fc; llama: gate
  ParameterEntry* mlp_in_bias_;
  ParameterEntry* mlp_up_weight_;  // llama only
  ParameterEntry* mlp_up_bias_;
  ParameterEntry* mlp_output_weight_;
  ParameterEntry* mlp_output_bias_;

  // Activations of the last forward (one micro-batch).
  std::int64_t batch_ = 0, seq_ = 0;
  Tensor norm1_, mean1_, rstd1_, qkv_, attention_out_, lse_, branch_, middle_;
  Tensor norm2_, mean2_, rstd2_, hidden_in_, up_, hidden_out_;
};

}  // namespace strata::executor
