#include "strata/costmodels/activation_memory.h"

#include <algorithm>
#include <cmath>

#include "strata/costmodels/moe_block_costs.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/costmodels/unfused_elementwise.h"

namespace strata::costmodels {
namespace {

// Strata's executor's backward scratch (LayerScratch::resize in
// executor/src/model/transformer_layer.cpp), allocated once per micro-batch shape and shared by
// every layer of the rank, and the two residual-gradient buffers the stage's backward alternates
// between (Transformer::allocate).
double executor_scratch_bytes(const LayerContext& context) {
  const double tokens = context.local_tokens();
  const double norm_tokens = context.norm_tokens();
  const LocalLayerDims d = local_layer_dims(context);
  const double hidden = d.hidden, head_dim = d.head_dim, heads = d.heads, kv_heads = d.kv_heads,
               ffn = d.ffn, gate = d.gate;
  const double sp = context.sequence_parallel ? 1.0 : 0.0;
  return context.activation_bytes() *
         ((2 + 2 * sp) * tokens * hidden + (5 + 3 * sp) * norm_tokens * hidden +
          tokens * heads * head_dim + tokens * (heads + 2 * kv_heads) * head_dim +
          tokens * (1 + gate) * ffn);
}

// Context parallelism's attention buffers while a layer's attention runs, shared by the layers:
// the ring's block in hand and the arriving one, and in the backward three of their gradients
// (two contributions, one computed while the other is sent, and the sum arriving), or the
// all-gather variant's gathered keys and values of the whole sequence and their gradients; both
// with the per-query softmax term of the backward (executor/model/ring_attention.h,
// all_gather_attention.h).
double context_parallel_attention_bytes(const LayerContext& context) {
  if (context.cp == 1) return 0;
  const double element = context.activation_bytes();
  const double tokens = context.local_tokens();
  const LocalLayerDims d = local_layer_dims(context);
  const double keys_values = element * tokens * d.kv_heads * (d.head_dim + d.value_dim);
  const double heads = d.heads;
  const double output_dot = element * tokens * heads;
  const double blocks = context.cp_comm == schemas::ContextParallelComm::all_gather
                            ? 2.0 * static_cast<double>(context.cp) + 2.0
                            : 5.0;
  return blocks * keys_values + output_dot;
}

// Under torch.autocast (unfused_elementwise.h) each GEMM keeps, for its input gradient, the
// 16-bit copy of its fp32 weight the forward cast: one copy per micro-batch in flight, as each
// forward casts again. Weight matrices only: a bias's copy feeds the addition and is not kept.
double autocast_weight_copy_bytes(const LayerContext& context, LayerKind kind) {
  const schemas::ModelConfig& model = *context.model;
  const double tp = static_cast<double>(context.tp);
  double matrices = static_cast<double>(attention_matrix_parameters(model)) / tp;
  if (kind == LayerKind::moe) {
    const schemas::MoeConfig& moe = *model.moe;
    matrices += static_cast<double>(mlp_matrix_parameters(
                    model, moe.num_shared_experts * moe.shared_expert_ffn_hidden_size)) /
                tp;
    matrices += static_cast<double>(moe.num_experts / context.ep) *
                static_cast<double>(mlp_matrix_parameters(model, moe.expert_ffn_hidden_size)) /
                static_cast<double>(context.etp);
  } else {
    matrices += static_cast<double>(mlp_matrix_parameters(model, model.ffn_hidden_size)) / tp;
  }
  return context.activation_bytes() * matrices;
}

// What each module a selective plan may recompute holds beyond its input (which another part
// keeps anyway): attention's core — its scores (unfused) or its output and log-sum-exp (flash) —
// latent attention's queries, keys and values from the latents kept, a dense MLP's fc1 input and
// output and fc2 input from the residual kept, the router's normed tokens and the experts'
// activation output.
struct RecomputableBytes {
  double core_attention = 0;
  double up_projections = 0;
  double mlp = 0;
  double router_norm = 0;
  double moe_activation = 0;
};

// The bytes a selectively recomputed layer of `kind` drops: those of the modules it recomputes.
double selectively_dropped_bytes(const LayerContext& context, LayerKind kind,
                                 const RecomputableBytes& parts) {
  using schemas::RecomputeModule;
  const bool moe_layer = kind == LayerKind::moe;
  double dropped = 0;
  if (context.recomputes(RecomputeModule::core_attn)) dropped += parts.core_attention;
  if (context.recomputes(RecomputeModule::mla_up_proj) && context.model->mla) {
    dropped += parts.up_projections;
  }
  // (A layer without an MLP holds nothing there: its `mlp` is 0.)
  if (context.recomputes(RecomputeModule::mlp) && kind == LayerKind::dense) dropped += parts.mlp;
  if (moe_layer && context.recomputes(RecomputeModule::layernorm)) dropped += parts.router_norm;
  if (moe_layer && context.recomputes(RecomputeModule::moe_act)) dropped += parts.moe_activation;
  return dropped;
}

}  // namespace

LayerActivationBytes layer_activation_bytes(const LayerContext& context,
                                            schemas::RecomputeGranularity recompute,
                                            LayerKind kind) {
  using schemas::AttentionKernel;
  const AttentionKernel kernel = context.attention;
  const schemas::ModelConfig& model = *context.model;
  const double element = context.activation_bytes();
  const double tokens = context.local_tokens();
  const double norm_tokens = context.norm_tokens();
  const LocalLayerDims d = local_layer_dims(context, kind);
  const double hidden = d.hidden, head_dim = d.head_dim, heads = d.heads, kv_heads = d.kv_heads,
               ffn = d.ffn, gate = d.gate;
  const double mask = model.dropout > 0 ? 1.0 : 0.0;
  // The residual stream each norm reads, kept for its backward: fp32 under torch.autocast.
  const bool autocast = autocasts_parameters(context);
  const double residual = autocast ? kAutocastMasterBytes : element;
  const double batch = static_cast<double>(context.micro_batch_size);
  const double query_tokens =
      static_cast<double>(context.seq_length) / static_cast<double>(context.cp);
  const double key_tokens = static_cast<double>(context.seq_length);

  // What a GEMM keeps of its input for its weight gradient: the input itself, or under a quantised
  // recipe the low-precision copy the GEMM ran on (Transformer Engine saves the fp8, mxfp8 or nvfp4
  // tensor it quantised, with its block scales, not the 16-bit one).
  const bool quantised = schemas::quantises_gemms(context.precision);
  const double saved = quantised ? schemas::dtype_bytes(context.precision) : element;
  const double qkv_input = saved * norm_tokens * hidden;
  // Queries and keys head_dim wide, values value_dim; latent attention also keeps its latents
  // (the up projections' inputs).
  const double qkv =
      element * tokens * ((heads + kv_heads) * head_dim + kv_heads * d.value_dim + d.latent);
  const double attention_output = element * tokens * heads * d.value_dim;
  // The output projection's input is the attention output itself in 16 bits; quantised, the
  // projection keeps its own low-precision copy beside the output flash attention keeps.
  const double projection_copy = quantised ? saved * tokens * heads * d.value_dim : 0.0;
  const double projection_input = quantised ? projection_copy : attention_output;
  // fc1's input (a MoE layer's shared experts'); a MoE layer's router, in 16 bits, keeps the same
  // normed tokens whole.
  const bool moe_layer = kind == LayerKind::moe;
  const double fc1_input =
      (moe_layer ? element * norm_tokens * hidden : 0.0) +
      (ffn > 0 && (quantised || !moe_layer) ? saved * norm_tokens * hidden : 0.0);
  const double fc2_input = saved * tokens * ffn;
  // Unfused: the softmax output, and with dropout its mask and output, per score. Under autocast
  // the softmax runs in fp32 and the product with V casts what it reads to 16 bits and keeps that
  // copy: 4 bytes, the mask, and the copy.
  const double score_bytes = autocast ? kAutocastMasterBytes + mask + element
                                      : element + mask + (mask > 0 ? element : 0.0);
  const double core_scores =
      kernel == AttentionKernel::unfused
          ? score_bytes * batch * heads * query_tokens * key_tokens
          : 4.0 * batch * heads * query_tokens;  // flash: the fp32 log-sum-exp per query
  const double attention_block = residual * norm_tokens * hidden + qkv_input + qkv +
                                 attention_output + projection_copy + mask * norm_tokens * hidden;
  double mlp_block = residual * norm_tokens * hidden + fc1_input + element * tokens * gate * ffn +
                     fc2_input + mask * norm_tokens * hidden;
  // Output gradients of the layer's GEMMs, produced by the input-gradient pass, live until W.
  double output_gradients =
      element * tokens * ((heads + kv_heads) * head_dim + kv_heads * d.value_dim) +
      element * norm_tokens * hidden + element * tokens * gate * ffn +
      element * norm_tokens * hidden;
  double expert_weight_inputs = 0;
  double expert_fc2_inputs = 0;
  double dispatch_buffers = 0;
  if (kind == LayerKind::moe) {
    // The routed experts keep their permuted input tokens, the activation's input, fc2's input
    // and fc2's output (the un-permute's weighted sum needs it), and the router its fp32
    // probabilities and routing map; the backward writes the expert GEMMs' output gradients and
    // receives the dispatched gradients into buffers of the computed tokens.
    const MoeTokenCounts routed = moe_token_counts(context);
    const double computed = routed.computed;
    const double width = routed.expert_width;
    const double experts = static_cast<double>(model.moe->num_experts);
    // The permuted tokens and fc2's input are the expert GEMMs' inputs (kept low-precision under a
    // quantised recipe); the activation's input and fc2's output stay 16-bit.
    expert_fc2_inputs = saved * computed * width;
    expert_weight_inputs = saved * computed * hidden + expert_fc2_inputs;
    mlp_block += expert_weight_inputs + element * computed * (hidden + gate * width) +
                 (4.0 + 1.0) * routed.block_tokens * experts;
    output_gradients += element * computed * (gate * width + hidden);
    dispatch_buffers = 2 * element * computed * hidden;
  }
  const double weight_copies = autocast ? autocast_weight_copy_bytes(context, kind) : 0.0;
  const double full_layer = attention_block + mlp_block + core_scores + weight_copies;

  LayerActivationBytes bytes;
  // What the backward writes into: Megatron's output gradients, or the executor's scratch.
  const double backward_buffers =
      (context.executor_activation_buffers ? executor_scratch_bytes(context) : output_gradients) +
      context_parallel_attention_bytes(context) + dispatch_buffers;
  switch (recompute) {
    case schemas::RecomputeGranularity::none:
      bytes.stored = full_layer;
      bytes.working = backward_buffers;
      break;
    case schemas::RecomputeGranularity::selective: {
      const RecomputableBytes parts{
          .core_attention =
              kernel == AttentionKernel::unfused ? core_scores : core_scores + attention_output,
          .up_projections =
              element * tokens * ((heads + kv_heads) * head_dim + kv_heads * d.value_dim),
          .mlp = fc1_input + element * tokens * gate * ffn + fc2_input,
          .router_norm = element * norm_tokens * hidden,
          .moe_activation = expert_fc2_inputs};
      const double dropped = selectively_dropped_bytes(context, kind, parts);
      bytes.stored = full_layer - dropped;
      bytes.working = backward_buffers + dropped;
      break;
    }
    case schemas::RecomputeGranularity::full:
      bytes.stored = residual * norm_tokens * hidden;
      bytes.working = backward_buffers + full_layer;
      break;
  }
  bytes.weight_inputs = std::min(bytes.stored, qkv_input + projection_input + fc1_input +
                                                   fc2_input + expert_weight_inputs) +
                        output_gradients;
  return bytes;
}

LayerActivationBytes embedding_activation_bytes(const LayerContext& context) {
  const double mask = context.model->dropout > 0 ? 1.0 : 0.0;
  return {.stored = mask * context.norm_tokens() * static_cast<double>(context.model->hidden_size),
          .weight_inputs = 0,
          .working = 0};
}

LayerActivationBytes lm_head_activation_bytes(const LayerContext& context) {
  const double hidden = static_cast<double>(context.model->hidden_size);
  const double element = context.activation_bytes();
  const double tokens = context.local_tokens();
  const double vocab =
      static_cast<double>(context.model->vocab_size) / static_cast<double>(context.tp);
  // The final norm's input and the head's. Under torch.autocast the norm reads the fp32 residual
  // stream and the head keeps the 16-bit copy of its weight the forward cast.
  const bool autocast = autocasts_parameters(context);
  const double residual = autocast ? kAutocastMasterBytes : element;
  const double inputs = residual * context.norm_tokens() * hidden + element * tokens * hidden +
                        (autocast ? element * vocab * hidden : 0.0);
  if (context.executor_activation_buffers) {
    // One [tokens, vocab] buffer in the compute dtype: the logits, then their gradient; and the
    // final norm's output gradient (the rank's, counted here once).
    const double logits = element * tokens * vocab;
    const double final_norm_gradient =
        element * (tokens + (context.sequence_parallel ? context.norm_tokens() : 0)) * hidden;
    return {.stored = inputs + logits + final_norm_gradient,
            .weight_inputs = element * tokens * hidden + logits,
            .working = 0};
  }
  if (context.loss_gradient_in_logits) {
    // The fused loss leaves the logits' gradient in the 16-bit logits and keeps nothing else of
    // the vocabulary's width (Transformer Engine's cross-entropy).
    const double logits = element * tokens * vocab;
    return {.stored = inputs + logits,
            .weight_inputs = element * tokens * hidden + logits,
            .working = 0};
  }
  const double softmax = 4.0 * tokens * vocab;
  // While the loss runs, the 16-bit logits and their fp32 copy are live beside the kept softmax.
  return {.stored = inputs + softmax,
          .weight_inputs = element * tokens * hidden + element * tokens * vocab,
          .working = (element + 4.0) * tokens * vocab};
}

}  // namespace strata::costmodels
