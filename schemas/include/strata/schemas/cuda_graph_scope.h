// CudaGraphScope: which parts of a training step a stack replays from CUDA graphs instead of
// launching kernel by kernel from Python (Megatron-Core's --cuda-graph-scope with
// --cuda-graph-impl transformer_engine per layer, or local for the whole iteration). A replayed
// graph costs the host one launch however many kernels it holds, so captured parts leave the
// host-issue bound of eager stacks (costmodels/layer_costs.h, "host issue").
//   full_iteration  the whole forward, backward and optimizer step (no host synchronisation may
//                   happen inside: not with dropless mixture-of-experts dispatch)
//   attn            each layer's attention block: its norm, GEMMs, core, rotary, residual and
//                   tensor-parallel collectives
//   mlp             each dense layer's MLP block, likewise
//   moe             each MoE layer's whole block, dispatch and experts included (static shapes:
//                   needs a capacity factor)
//   moe_router      the router: its GEMM, scores, top-k and balancing terms
//   moe_preprocess  the dispatcher's token counts and split sizes before the dispatch
#pragma once

#include <array>

#include "strata/schemas/enum_names.h"
#include "strata/schemas/training_framework.h"

namespace strata::schemas {

enum class CudaGraphScope { full_iteration, attn, mlp, moe, moe_router, moe_preprocess };
inline constexpr std::array<EnumName<CudaGraphScope>, 6> kCudaGraphScopeNames{
    {{CudaGraphScope::full_iteration, "full_iteration"},
     {CudaGraphScope::attn, "attn"},
     {CudaGraphScope::mlp, "mlp"},
     {CudaGraphScope::moe, "moe"},
     {CudaGraphScope::moe_router, "moe_router"},
     {CudaGraphScope::moe_preprocess, "moe_preprocess"}}};

// Whether the stack captures those scopes: Megatron-Core (Megatron-LM and NeMo/Megatron-Bridge).
// A capability the plan format checks.
constexpr bool captures_cuda_graphs(TrainingFramework framework) {
  return framework == TrainingFramework::megatron_lm || framework == TrainingFramework::nemo;
}

}  // namespace strata::schemas
