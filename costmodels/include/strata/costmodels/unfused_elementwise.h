// The element-wise work a training stack runs in a transformer layer beyond the kernels the layer
// costs count for a fused stack (layer_costs.h: two norms, two bias-dropout-adds, the activation,
// rotary, each in 16 bits). Which of it a stack runs is its behaviour (framework_behaviour.h):
//
//   autocast over fp32 parameters (a plain PyTorch loop under torch.autocast): each forward casts
//     every GEMM's weight and bias to 16 bits (one kernel each, 4 + 2 bytes per parameter) and each
//     norm's fp32 output for the GEMM it feeds (4 + 2 bytes per element); the residual stream stays
//     in fp32, so the norms read and write 4 bytes and the residual adds read 4 + 2 and write 4
//     (bytes of kernels already counted: the backward moves twice them, as for every norm and add);
//     the backward casts each weight's and bias's gradient back to fp32 and each norm's input
//     gradient to fp32.
//   bias gradients in kernels of their own (nn.Linear's backward, Megatron's
//     LinearWithGradAccumulation and its jit-fused bias-GELU and bias-dropout-add): one reduction
//     over the tokens per bias, reading the output gradient (Transformer Engine folds it into the
//     weight-gradient GEMM).
//   unfused element-wise (eager module code): dropout apart from the residual add, SwiGLU's SiLU
//     apart from its product, and the q, k and v gradients of a fused projection concatenated into
//     its gradient (SDPA returns them apart).
//
// A mixture of experts' routed experts are priced on their own (moe_block_costs.h); their casts
// are not counted here.
#pragma once

#include <vector>

#include "strata/costmodels/gemm_passes.h"
#include "strata/costmodels/layer_costs.h"

namespace strata::costmodels {

struct UnfusedElementwise {
  // Bytes that kernels the fused count already has move on top of it (the forward's; the backward
  // moves twice them).
  double widened_forward_bytes = 0;
  // Kernels of their own, and what they move, per pass.
  double forward_bytes = 0;
  double forward_kernels = 0;
  double backward_input_bytes = 0;
  double backward_input_kernels = 0;
  double backward_weight_bytes = 0;
  double backward_weight_kernels = 0;
};

// Whether the plan's stack runs it under torch.autocast: a 16-bit plan (bf16 or fp16) of a stack
// that keeps its parameters, residual stream and norms in fp32 (kAutocastMasterBytes).
bool autocasts_parameters(const LayerContext& context);
inline constexpr double kAutocastMasterBytes = 4;

// `dims` are the layer's local sizes and `shapes` its GEMMs (attention's, then the MLP's fc1 and
// fc2 when the layer has a dense MLP or shared experts), as transformer_layer_costs.cpp prices
// them.
UnfusedElementwise unfused_elementwise(const LayerContext& context, const LocalLayerDims& dims,
                                       const std::vector<GemmShape>& shapes);

}  // namespace strata::costmodels
