// The tensor-core (bfloat16, head_dim 64 or 128) kernels behind causal_attention.cu. Private to
// src/ops/cuda.
#pragma once

#include <cstdint>

#include "causal_attention.cuh"

namespace strata::executor::cuda {

bool flash_attention_supports(std::int64_t head_dim);

// out, lse from qkv (all bfloat16 but lse).
void launch_flash_attention_forward(const void* qkv, void* out, float* lse,
                                    const AttentionDims& dims);
// dK and dV added into dqkv; dQ, scaled by 1/√d, added into dq_accumulator (float32, laid out
// as out: [batch·seq, heads·head_dim], zeroed by the caller). row_dot[b, h, t] = Σ_d dout·out.
void launch_flash_attention_backward(const void* dout, const void* qkv, const float* lse,
                                     const float* row_dot, void* dqkv, float* dq_accumulator,
                                     const AttentionDims& dims);

}  // namespace strata::executor::cuda
