// TransformerLayer: one pre-norm decoder layer (gpt or llama), its forward pass storing what
// backward needs and its explicit backward pass, on one rank or as Megatron's tensor-parallel
// layer (column-parallel qkv / fc / gate / up, row-parallel outputs, optionally sequence
// parallel). Used by Transformer, one per layer.
//
//   x ─┬─ norm ─ qkv (or latent attention's projections) ─(qk norm)─(rotary)─ causal attention ─
//   output proj ─ dropout ─(+)─┬─ norm ─ MLP ─ dropout ─(+)─ out
//      └──────────────────────────────────────────────────────────────────────┘
//      └─────────────────────┘
//   MLP: fc ─ GELU or squared ReLU ─ output, or (gate, up) ─ SwiGLU ─ output; on the layers a
//   model's `moe` block names, a mixture of experts of that kind (model/moe_mlp.h)
//
// With tensor parallelism (model/tensor_parallel.h) the norms, dropout and residuals run on this
// rank's tokens (all of them without SP), the projections and attention on its heads and MLP
// columns; gather_sequence enters the parallel region before qkv and the MLP's input, and
// reduce_sequence leaves it after each output projection, whose bias is added after the sum.
// With context parallelism (model/context_parallel.h) the layer runs on the rank's chunks of each
// sequence: RoPE and dropout at the tokens' global positions, attention around the cp ring
// (model/ring_attention.h) or over all-gathered keys (model/all_gather_attention.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "strata/executor/model/all_gather_attention.h"
#include "strata/executor/model/context_parallel.h"
#include "strata/executor/model/latent_attention.h"
#include "strata/executor/model/moe_mlp.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/executor/model/query_key_norm.h"
#include "strata/executor/model/ring_attention.h"
#include "strata/executor/model/tensor_parallel.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/ops/gradient_write.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// Where in the step a micro-batch's dropout masks come from (see ops/dropout.h).
struct DropoutContext {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::int64_t first_token = 0;  // global index of the micro-batch's first token in the step
  // False in evaluation and sampling: every dropout site passes its input through, as PyTorch's
  // model.eval() does.
  bool active = true;
};

// The mask key of dropout site `site` (0: after the embedding; 1 + 2l and 2 + 2l: layer l's
// attention and MLP branches) for a micro-batch's [tokens, hidden] activations.
DropoutKey dropout_key(const schemas::ModelConfig& model, const DropoutContext& context,
                       std::uint32_t site);

// The attention shape rank `tp_rank` of a tp group of `tp_size` computes: its query heads and the
// kv heads they read (one replicated kv head when tp exceeds the kv heads), and with ALiBi where
// its heads start among the model's.
AttentionShape local_attention_shape(const schemas::ModelConfig& model, std::int64_t tp_size,
                                     std::int64_t tp_rank = 0);

// What backward needs from a layer's forward, for one micro-batch: a pipeline keeps one set per
// micro-batch in flight. A layer that recomputes (full recomputation) keeps none between its
// forward and backward: all recomputing layers share one set, refilled by rerunning the forward
// just before the backward.
struct LayerActivations {
  std::int64_t batch = 0, seq = 0;  // of the forward that filled them
  Tensor mean1, rstd1, norm1_full, qkv, attention_out, lse, middle;
  Tensor mean2, rstd2, norm2_full, hidden_in, up, hidden_out;
  MoeActivations moe;               // a MoE layer's, in place of hidden_in, up and hidden_out
  QueryKeyNormActivations qk_norm;  // with the model's qk_norm
  LatentAttentionActivations mla;   // with latent attention, whose projections fill qkv
};

// The weight-gradient work that a zero-bubble schedule's input-gradient pass (I) leaves for its
// weight pass (W): each linear's output gradient and input, copied so that the activations and
// scratch buffers they came from can be reused before W runs. The parameter entry is resolved
// when W runs (ZeRO-2/3 bind gradient buffers per pass).
struct DeferredWeightGradient {
  Tensor dy, x;
  ParameterEntry* weight = nullptr;
  ParameterEntry* bias = nullptr;  // null: the bias has its own pass, or there is none
};
using DeferredWeightGradients = std::vector<DeferredWeightGradient>;
// Runs and clears the deferred work: dweight += dyᵀ·x, dbias += Σ_rows dy.
void run_deferred_weight_gradients(DeferredWeightGradients& work);

// Per-micro-batch buffers shared by all layers: the backward's gradients and, under sequence
// parallelism, the forward's token-sharded intermediates.
struct LayerScratch {
  Tensor norm_local, branch_full, branch, mlp_full;
  Tensor d_norm, d_norm_full, d_attention, d_qkv, d_hidden, d_gate, d_up, d_middle,
      d_attention_branch, d_branch, d_branch_full;
  RingAttentionBuffers ring;  // context parallelism's, by cp_comm
  AllGatherAttentionBuffers all_gathered;
  void resize(const schemas::ModelConfig& model, const TensorParallelism& tp, std::int64_t batch,
              std::int64_t seq, ScalarType type, Device device);

 private:
  std::int64_t batch_ = 0, seq_ = 0;
};

class TransformerLayer {
 public:
  // `ep`: the group a MoE layer's routed experts are split over (unused by a dense layer).
  TransformerLayer(const schemas::ModelConfig& model, std::int64_t index, ParameterStore& store,
                   const TensorParallelism& tp, const ContextParallelism& cp,
                   ExpertParallelism ep = {});

  // A recomputing layer's forward keeps nothing for its backward, which reruns it first: its
  // caller hands both the shared set of all recomputing layers.
  void set_recompute(bool recompute) { recompute_ = recompute; }
  bool recomputes() const { return recompute_; }
  // The layer's mixture of experts; null on a dense layer.
  MoeMlp* moe() { return moe_ ? &*moe_ : nullptr; }

  // out = layer(x) for x and out [local tokens, hidden] of a micro-batch of batch × seq tokens
  // (seq: this cp rank's tokens of each sequence), keeping what backward needs in `a`.
  void forward(const Tensor& x, Tensor& out, std::int64_t batch, std::int64_t seq,
               const DropoutContext& dropout, LayerScratch& scratch, LayerActivations& a);
  // dx += ∂loss/∂x given d_out, from the activations `a` of the same micro-batch's forward;
  // parameter gradients accumulate in the store, or, with `deferred`, the linears' weight and
  // bias gradients are left there for a later W pass (norm gains and separately added biases are
  // done now). A recomputing layer first reruns its forward from x (writing `out` again, with
  // the same values). loss_scale is the scale of the micro-batch's token losses (see
  // Transformer::stage_backward): a MoE layer weighs its router losses by it times its tokens,
  // and computes its weight gradients now even when deferred.
  void backward(const Tensor& x, Tensor& out, const Tensor& d_out, Tensor& dx,
                const DropoutContext& dropout, double loss_scale, LayerScratch& scratch,
                LayerActivations& a, DeferredWeightGradients* deferred = nullptr);

 private:
  void allocate(LayerActivations& activations, std::int64_t batch, std::int64_t seq,
                ScalarType type, Device device);
  // The dropout of `branch` (0: attention, 1: MLP) on this rank's tokens of the micro-batch.
  void branch_dropout_forward(const DropoutContext& dropout, const LayerActivations& a, int branch,
                              Tensor& x) const;
  void branch_dropout_backward(const DropoutContext& dropout, const LayerActivations& a, int branch,
                               const Tensor& dy, Tensor& dx) const;
  bool separate_bias() const { return tp_.active(); }
  // dx += dy·W (or dx = dy·W, dx's only writer) now; W's and the bias's gradients now or, with
  // `deferred`, in the W pass.
  void linear_gradients(const Tensor& dy, const Tensor& x, ParameterEntry* weight,
                        ParameterEntry* bias, Tensor& dx, GradientWrite write,
                        DeferredWeightGradients* deferred);

  const schemas::ModelConfig& model_;
  std::int64_t index_;
  const TensorParallelism& tp_;
  const ContextParallelism& cp_;
  AttentionShape shape_;  // this rank's heads
  bool gated_mlp_;        // SwiGLU or clamped SwiGLU: gate and up projections
  std::optional<QueryKeyNorm> qk_norm_;
  std::optional<LatentAttention> mla_;         // in place of the fused qkv projection
  ParameterEntry* attention_sinks_ = nullptr;  // GPT-OSS's per-head sink logits, if any
  ParameterEntry* attention_norm_weight_;
  ParameterEntry* attention_norm_bias_;
  ParameterEntry* qkv_weight_;  // null with latent attention
  ParameterEntry* qkv_bias_;
  ParameterEntry* attention_output_weight_;
  ParameterEntry* attention_output_bias_;
  ParameterEntry* mlp_norm_weight_;
  ParameterEntry* mlp_norm_bias_;
  // The dense MLP's (null on a MoE layer, which has moe_ instead).
  ParameterEntry* mlp_in_weight_;  // gpt: fc; llama: gate
  ParameterEntry* mlp_in_bias_;
  ParameterEntry* mlp_up_weight_;  // llama only
  ParameterEntry* mlp_up_bias_;
  ParameterEntry* mlp_output_weight_;
  ParameterEntry* mlp_output_bias_;
  std::optional<MoeMlp> moe_;

  bool recompute_ = false;
};

}  // namespace strata::executor
