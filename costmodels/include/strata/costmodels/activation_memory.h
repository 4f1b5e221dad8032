// Activation memory a rank keeps between a micro-batch's forward and its backward, per layer,
// following Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
// (2022), generalised to grouped-query attention, SwiGLU, dropout-free models and flash attention.
//
// Per layer, in bytes, with E-byte activations (2 in 16-bit), T local tokens, Tn = T/t under
// sequence parallelism (else T), t = tp, h_r = heads/t, kv_r = ⌈kv/t⌉, f_r = ffn/t, g = 2 for
// SwiGLU, mask = 1 byte per element when dropout is on:
//   attention  norm input E·Tn·h, QKV input E·Tn·h, Q,K,V E·T·(h_r+2kv_r)·d,
//              attention output (= projection input) E·T·h_r·d, dropout mask mask·Tn·h;
//              unfused attention adds softmax E, dropout mask and dropout output per score:
//              (2E+mask)·b·h_r·s·s_kv — flash attention stores its fp32 log-sum-exp instead.
//   MLP        norm input E·Tn·h, fc1 input E·Tn·h, activation input E·T·g·f_r,
//              fc2 input E·T·f_r, dropout mask mask·Tn·h.
// With E = 2, dropout on, kv = heads, f = 4h, unfused attention and no sequence parallelism this
// is Korthikanti's s·b·h·(10 + 24/t + 5·a·s/(h·t)); with sequence parallelism s·b·h/t·(34 + 5as/h).
// Under a quantised recipe (fp8, mxfp8, nvfp4) each GEMM keeps for its weight gradient the
// low-precision copy of its input it ran on, as Transformer Engine does (q bytes per element with
// the block scales, schemas::dtype_bytes): the QKV, fc1 and fc2 inputs and the routed experts'
// inputs shrink to q, and the projection keeps a q-byte copy beside the 16-bit attention output
// flash attention needs (a dense fp8 layer of Llama 3.1 405B at tp 4 with sequence parallelism
// keeps 13% less).
//   selective recompute drops what the attention core recomputes (scores, or for flash its
//   output and log-sum-exp); full recompute keeps only the layer input, E·Tn·h.
// A stack that trains fp32 parameters under torch.autocast (unfused_elementwise.h) keeps the two
// norm inputs (the residual stream) in fp32, 4·Tn·h each, and each GEMM the E-byte copy of its
// weight matrix the forward cast, which the backward needs for the input gradient: E·(attention
// and MLP matrices)/t per layer and micro-batch in flight (a GPT layer keeps 36·T·h + 24·h²
// bytes where Megatron's keeps 32·T·h, flash attention and no dropout); unfused attention keeps
// per score autocast's fp32 softmax output and the 16-bit copy its product with V reads (4 + E,
// and the mask); its LM head keeps the fp32 final-norm input and its weight's copy.
// tests/reference/autocast_saved_tensors_test.py holds the layer against PyTorch's autograd.
//
// What the backward needs beside them (`working`) depends on the stack. Megatron's: the output
// gradients of the layer's four GEMMs. Strata's executor (executor_activation_buffers): one
// scratch set every layer of the rank shares, E·[(2 + 2sp)·T·h + (5 + 3sp)·Tn·h + T·h_r·d +
// T·(h_r + 2kv_r)·d + T·(1 + g)·f_r] (the branch, the norm's, attention's, QKV's and the MLP's
// gradients, the residual gradients, and the token-sharded copies sequence parallelism adds); and
// its LM head keeps the logits in the compute dtype, overwritten by their gradient, and the final
// norm's gradient, instead of Megatron's fp32 softmax beside the 16-bit logits and their copy.
#pragma once

#include "strata/costmodels/layer_costs.h"

namespace strata::costmodels {

struct LayerActivationBytes {
  double stored = 0;         // kept from forward to backward
  double weight_inputs = 0;  // of `stored` plus output gradients: what a deferred W still needs
  double working = 0;        // extra live while this layer's backward (or recompute) runs
};

// With the context's attention kernel (unfused keeps the s×s scores). A MoE layer keeps, beside
// its attention, router input and shared experts' MLP, its routed experts' permuted inputs,
// activation input, fc2 input and output for R = etp·Tn·k·imbalance token-expert pairs
// (moe_block_costs.h) and the router's fp32 probabilities and routing map; its backward adds the
// expert GEMMs' output gradients and two dispatch buffers of R tokens.
LayerActivationBytes layer_activation_bytes(const LayerContext& context,
                                            schemas::RecomputeGranularity recompute,
                                            LayerKind kind = LayerKind::dense);

// The first stage's extra: the embedding's dropout mask. The last stage's: the final norm's and
// LM head's inputs and the fp32 softmax the vocab-parallel cross-entropy keeps for backward — or,
// where the stack fuses the loss (loss_gradient_in_logits), the 16-bit logits holding their
// gradient.
LayerActivationBytes embedding_activation_bytes(const LayerContext& context);
LayerActivationBytes lm_head_activation_bytes(const LayerContext& context);

}  // namespace strata::costmodels
