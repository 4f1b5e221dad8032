// Time of attention's core (QKᵀ, softmax, PV and their gradients) on one GPU, by the kernel that
// runs it (the plan's `attention`):
//
// flash — one fused kernel over 128×128 tiles of the score matrix that never stores it. Under a
//   causal mask it skips the tiles above the diagonal and computes the diagonal ones whole, so it
//   computes E = b·H·q·(k/2 + 64) scores (the +64 is half a tile per query: 6% at 2,048 tokens,
//   1.6% at 8,192). Per score the forward does 4d tensor-core FLOPs (QKᵀ and PV) and one
//   exponential; the backward 10d (QKᵀ recomputed, dP, dV, dQ, dK) and the exponential again.
//   The exponentials run on the special-function units (16 per SM per clock: 3.9 T/s on an H100,
//   2.4 on an A100, against ~1,000 and 312 TFLOP/s of tensor cores), and FlashAttention-2-class
//   kernels do not overlap them with the products:
//     time = 4d·E / (peak · e) + E / sfu      (backward: 10d·E / (peak · e) + E / sfu)
//   with e the GPU's `attention_efficiency` (else its GEMM curve). The exponential's share is what
//   makes small heads slow: at d = 64 it is a third of the forward on an H100, at d = 128 a fifth.
//   A sliding window of w keys skips the tiles below its band as well: a query's tiles span its
//   w visible keys plus a tile's width across the band's two ragged edges, E = b·H·q·(w̄ + 128)
//   with w̄ the mean visible keys, capped by the causal count.
//
// unfused — separate kernels over the whole s×s score matrix (Megatron-LM before 2023): costed
//   at the GPU's `unfused_attention_efficiency` on the causal FLOPs (else its GEMM curve).
#pragma once

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/dtype.h"
#include "strata/schemas/plan.h"

namespace strata::costmodels {

// `batch` sequences, `heads` query heads of `head_dim` on this GPU, each of `query_tokens`
// queries attending causally to `key_tokens` keys (fewer queries than keys under context
// parallelism: this rank's share of the sequence against all of it).
struct AttentionShape {
  double batch = 1;
  double heads = 1;
  double query_tokens = 0;
  double key_tokens = 0;
  double head_dim = 0;
  // A sliding window's size (0: none): a query sees itself and the window − 1 keys before it.
  double window = 0;
};

// The useful FLOPs (what MFU-style counting charges): forward QKᵀ and PV over the causal half,
// 4·b·H·q·k·d·½ — under a window over the keys each query sees on average
// (schemas::mean_visible_keys) instead of k/2; backward 2.5× (FlashAttention-2's accounting).
struct AttentionFlops {
  double forward = 0;
  double backward = 0;
};
AttentionFlops causal_attention_flops(const AttentionShape& shape);

struct AttentionTime {
  double forward_s = 0;
  double backward_s = 0;
};
AttentionTime attention_time(const schemas::GpuProfile& gpu, schemas::Dtype dtype,
                             schemas::AttentionKernel kernel, const AttentionShape& shape);

}  // namespace strata::costmodels
