#include "strata/costmodels/attention_time.h"

#include <algorithm>

#include "strata/costmodels/kernel_time.h"
#include "strata/schemas/sliding_window.h"

namespace strata::costmodels {
namespace {

// FlashAttention-2's tile side along the keys (and Transformer Engine's / cuDNN's): the diagonal
// tiles of a causal mask are computed whole.
constexpr double kTileKeys = 128;

// Keys a query sees on average: half the sequence causally, fewer under a shorter window.
double useful_keys_per_query(const AttentionShape& shape) {
  if (shape.window <= 0 || shape.window >= shape.key_tokens) return shape.key_tokens * 0.5;
  return schemas::mean_visible_keys(static_cast<std::int64_t>(shape.key_tokens),
                                    static_cast<std::int64_t>(shape.window));
}

}  // namespace

AttentionFlops causal_attention_flops(const AttentionShape& shape) {
  // (Halving the keys, as causal counting does, is exact in floating point: the dense figures are
  // bit-identical to 4·b·H·q·k·d·½.)
  const double forward = 4.0 * shape.batch * shape.heads * shape.query_tokens *
                         useful_keys_per_query(shape) * shape.head_dim;
  return {.forward = forward, .backward = 2.5 * forward};
}

AttentionTime attention_time(const schemas::GpuProfile& gpu, schemas::Dtype dtype,
                             schemas::AttentionKernel kernel, const AttentionShape& shape) {
  const AttentionFlops useful = causal_attention_flops(shape);
  if (useful.forward <= 0) return {};
  // Attention runs in 16 bits even when the GEMMs are quantised (Transformer Engine's default).
  const schemas::Dtype kernel_dtype =
      schemas::quantises_gemms(dtype) ? schemas::Dtype::bf16 : dtype;
  const double peak = peak_tflops(gpu, kernel_dtype) * 1e12;
  if (kernel == schemas::AttentionKernel::unfused) {
    const double efficiency =
        gpu.unfused_attention_efficiency
            ? *gpu.unfused_attention_efficiency
            : interpolate_efficiency(gpu.gemm_efficiency_by_flops, useful.forward);
    // QKᵀ, softmax, dropout, PV; and five kernels back.
    return {.forward_s = std::max(useful.forward / (peak * efficiency), kernel_launch_s(gpu, 4)),
            .backward_s = std::max(useful.backward / (peak * efficiency), kernel_launch_s(gpu, 5))};
  }
  double keys_per_query = std::min(shape.key_tokens, shape.key_tokens / 2 + kTileKeys / 2);
  if (shape.window > 0 && shape.window < shape.key_tokens) {
    keys_per_query = std::min(keys_per_query, useful_keys_per_query(shape) + kTileKeys);
  }
  const double scores = shape.batch * shape.heads * shape.query_tokens * keys_per_query;
  const double forward_products = 4 * shape.head_dim * scores;
  const double backward_products = 10 * shape.head_dim * scores;
  const double efficiency =
      gpu.attention_efficiency
          ? *gpu.attention_efficiency
          : interpolate_efficiency(gpu.gemm_efficiency_by_flops, forward_products);
  const double exponentials_s =
      gpu.special_function_tops ? scores / (*gpu.special_function_tops * 1e12) : 0.0;
  // One fused kernel forward; two backward (FlashAttention-2's dO·O preprocessing, then the main).
  return {.forward_s = std::max(forward_products / (peak * efficiency) + exponentials_s,
                                kernel_launch_s(gpu, 1)),
          .backward_s = std::max(backward_products / (peak * efficiency) + exponentials_s,
                                 kernel_launch_s(gpu, 2))};
}

}  // namespace strata::costmodels
