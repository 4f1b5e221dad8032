// Causal GQA attention backward on tensor cores (bfloat16, head_dim 64 or 128), after
// FlashAttention-2's algorithm 2: a CTA owns 64 keys of one kv head, keeps their dK and dV in
// registers and walks every query block at or after them, for each query head of the group (so
// no two CTAs write the same dK or dV rows, and GQA needs no atomics for them). Per query block:
//
//   Sᵀ  = K·Qᵀ            (each warp: its 16 keys × the block's queries; fp32 registers)
//   Pᵀ  = exp(Sᵀ/√d − lse) (masked above the diagonal)
//   dPᵀ = V·dOᵀ
//   dSᵀ = Pᵀ ∘ (dPᵀ − Σ dO·O)
//   dV += Pᵀ·dO,  dK += dSᵀ·Q          (Pᵀ and dSᵀ feed the MMA from registers as bf16)
//   dQ += dS·K / √d                    (dSᵀ through shared memory; float32 atomics into an
//                                       accumulator, as FlashAttention-2 does)
//
// Query blocks are 64 queries for head_dim 64 and 32 for 128, which keeps dK and dV (16·d floats
// per warp each) in registers. Q and dO are double-buffered: the next query block is copied in
// (cp.async) while this one is computed; waiting for each copy cost 18% of the backward on an
// H200 (GPT-2 1.3B shapes: 1.66 → 1.35 ms a layer).
#include <cuda_bf16.h>

#include "../../cuda/device_math.cuh"
#include "../../cuda/warp_mma.cuh"
#include "flash_attention.cuh"

namespace strata::executor::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockKeys = 16 * kWarps;  // 64 keys a CTA, 16 a warp
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
struct BackwardShape {
  static constexpr int kBlockQ = D == 64 ? 64 : 32;
  static constexpr int kStride = D + 8;
  static constexpr int kScoreStride = kBlockQ + 8;
  static constexpr int kDepthSteps = D / 16;
  static constexpr int kQueryTiles = kBlockQ / 8;
  static constexpr int kDimTiles = D / 8;
  static constexpr bool kKeyValueInRegisters = D == 64;
  // dQ = dS·K is split over the warps as (query row tile) × (column group).
  static constexpr int kDqRowTiles = kBlockQ / 16;
  static constexpr int kDqColumnGroups = kWarps / kDqRowTiles;
  static constexpr int kDqColumns = D / kDqColumnGroups;
  static constexpr int kDqDimTiles = kDqColumns / 8;
  // K, V; two buffers each of Q and dO (the next query block lands while this one is used); dSᵀ;
  // two buffers each of the rows' log-sum-exp and dO·O.
  static constexpr int kSharedBytes = (2 * kBlockKeys + 4 * kBlockQ) * kStride * 2 +
                                      kBlockKeys * kScoreStride * 2 + 4 * kBlockQ * 4;
};

template <int D, int Rows>
__device__ __forceinline__ void copy_tile_async(bf16* tile, const bf16* head, std::int64_t width,
                                                int first_row, int seq) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kStride = D + 8;
  for (int chunk = threadIdx.x; chunk < Rows * kChunksPerRow; chunk += kThreads) {
    const int row = chunk / kChunksPerRow;
    const int column = (chunk % kChunksPerRow) * 8;
    const bool valid = first_row + row < seq;
    const bf16* source =
        head + (valid ? static_cast<std::int64_t>(first_row + row) * width : 0) + column;
    copy_async_16_or_zero(tile + row * kStride + column, source, valid);
  }
}

__device__ __forceinline__ void zero(FragmentC& fragment) {
#pragma unroll
  for (int e = 0; e < 4; ++e) fragment.value[e] = 0.0f;
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_backward_kernel(const bf16* dout, const bf16* qkv, const float* lse, const float* row_dot,
                          bf16* dqkv, float* dq_accumulator, int seq, int num_heads,
                          int num_kv_heads, float scale, float scale_log2) {
  using Shape = BackwardShape<D>;
  constexpr int kStride = Shape::kStride;
  constexpr int kBlockQ = Shape::kBlockQ;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  bf16* k_tile = reinterpret_cast<bf16*>(shared_bytes);
  bf16* v_tile = k_tile + kBlockKeys * kStride;
  bf16* q_tiles = v_tile + kBlockKeys * kStride;     // [2][kBlockQ][kStride]
  bf16* do_tiles = q_tiles + 2 * kBlockQ * kStride;  // [2][kBlockQ][kStride]
  bf16* ds_tile = do_tiles + 2 * kBlockQ * kStride;  // dSᵀ: [key][query]
  float* lse_tiles = reinterpret_cast<float*>(ds_tile + kBlockKeys * Shape::kScoreStride);
  float* dot_tiles = lse_tiles + 2 * kBlockQ;

  const std::int64_t width = static_cast<std::int64_t>(num_heads + 2 * num_kv_heads) * D;
  const std::int64_t out_width = static_cast<std::int64_t>(num_heads) * D;
  const int group = num_heads / num_kv_heads;
  const int first_key = static_cast<int>(blockIdx.x) * kBlockKeys;
  const int batch = static_cast<int>(blockIdx.y) / num_kv_heads;
  const int kv_head = static_cast<int>(blockIdx.y) % num_kv_heads;
  const bf16* rows = qkv + static_cast<std::int64_t>(batch) * seq * width;
  const bf16* out_rows = dout + static_cast<std::int64_t>(batch) * seq * out_width;
  const std::int64_t k_column = static_cast<std::int64_t>(num_heads + kv_head) * D;
  const std::int64_t v_column = static_cast<std::int64_t>(num_heads + num_kv_heads + kv_head) * D;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group_row = lane / 4;
  const int group_column = lane % 4;
  const int warp_first_key = first_key + warp * 16;

  copy_tile_async<D, kBlockKeys>(k_tile, rows + k_column, width, first_key, seq);
  copy_tile_async<D, kBlockKeys>(v_tile, rows + v_column, width, first_key, seq);
  copy_async_commit();

  FragmentC dk[Shape::kDimTiles], dv[Shape::kDimTiles];
#pragma unroll
  for (int dt = 0; dt < Shape::kDimTiles; ++dt) {
    zero(dk[dt]);
    zero(dv[dt]);
  }
  FragmentA k_fragment[Shape::kKeyValueInRegisters ? Shape::kDepthSteps : 1];
  FragmentA v_fragment[Shape::kKeyValueInRegisters ? Shape::kDepthSteps : 1];
  bool fragments_loaded = false;

  // The (query head, query block) pairs this CTA walks, in order: every head of the kv group, and
  // for each the query blocks at or after its keys. Pair i + 1's Q and dO are copied in (cp.async)
  // and its lse and dO·O read into registers while pair i is computed.
  const int first_query_block = first_key / kBlockQ;
  const int query_blocks = (seq + kBlockQ - 1) / kBlockQ;
  const int blocks_per_head = query_blocks - first_query_block;
  const int pairs = group * blocks_per_head;
  auto head_of = [&](int pair) { return kv_head * group + pair / blocks_per_head; };
  auto first_query_of = [&](int pair) {
    return (first_query_block + pair % blocks_per_head) * kBlockQ;
  };
  auto row_stats = [&](int pair, const float* stats) {
    return stats + (static_cast<std::int64_t>(batch) * num_heads + head_of(pair)) * seq;
  };
  auto copy_query_block_async = [&](int pair, int buffer) {
    const int head = head_of(pair);
    const int first_query = first_query_of(pair);
    copy_tile_async<D, kBlockQ>(q_tiles + buffer * kBlockQ * kStride,
                                rows + static_cast<std::int64_t>(head) * D, width, first_query,
                                seq);
    copy_tile_async<D, kBlockQ>(do_tiles + buffer * kBlockQ * kStride,
                                out_rows + static_cast<std::int64_t>(head) * D, out_width,
                                first_query, seq);
  };
  // lse (in base 2) and dO·O of query `first_query + threadIdx.x`; zeros past the sequence.
  auto read_stats = [&](int pair, float& lse_value, float& dot_value) {
    const int query = first_query_of(pair) + static_cast<int>(threadIdx.x);
    const bool valid = threadIdx.x < kBlockQ && query < seq;
    lse_value = valid ? row_stats(pair, lse)[query] * kLog2e : 0.0f;
    dot_value = valid ? row_stats(pair, row_dot)[query] : 0.0f;
  };
  if (pairs > 0) {
    copy_query_block_async(0, 0);
    float lse_value, dot_value;
    read_stats(0, lse_value, dot_value);
    if (threadIdx.x < kBlockQ) {
      lse_tiles[threadIdx.x] = lse_value;
      dot_tiles[threadIdx.x] = dot_value;
    }
  }
  copy_async_commit();

  for (int pair = 0; pair < pairs; ++pair) {
    const int buffer = pair & 1;
    const int head = head_of(pair);
    const int first_query = first_query_of(pair);
    const bf16* q_tile = q_tiles + buffer * kBlockQ * kStride;
    const bf16* do_tile = do_tiles + buffer * kBlockQ * kStride;
    const float* lse_tile = lse_tiles + buffer * kBlockQ;
    const float* dot_tile = dot_tiles + buffer * kBlockQ;
    // The other buffers were last read by pair − 1, which every thread finished (the barrier that
    // ends each pair): the next pair's copies can start before this one's math.
    float next_lse = 0.0f, next_dot = 0.0f;
    if (pair + 1 < pairs) {
      copy_query_block_async(pair + 1, buffer ^ 1);
      read_stats(pair + 1, next_lse, next_dot);
    }
    copy_async_commit();
    copy_async_wait<1>();  // all but the newest group: K, V and this pair's Q and dO have landed
    __syncthreads();
    if constexpr (Shape::kKeyValueInRegisters) {
      if (!fragments_loaded) {
#pragma unroll
        for (int kk = 0; kk < Shape::kDepthSteps; ++kk) {
          k_fragment[kk] = load_a(k_tile + warp * 16 * kStride + kk * 16, kStride, lane);
          v_fragment[kk] = load_a(v_tile + warp * 16 * kStride + kk * 16, kStride, lane);
        }
        fragments_loaded = true;
      }
    }
    // A warp whose keys all follow every query of the block gets Pᵀ = 0 (warp-uniform).
    const bool active = warp_first_key <= first_query + kBlockQ - 1;
    if (active) {
      FragmentC s[Shape::kQueryTiles], dp[Shape::kQueryTiles];
#pragma unroll
      for (int nt = 0; nt < Shape::kQueryTiles; ++nt) {
        zero(s[nt]);
        zero(dp[nt]);
      }
#pragma unroll
      for (int kk = 0; kk < Shape::kDepthSteps; ++kk) {
        FragmentA k_a, v_a;
        if constexpr (Shape::kKeyValueInRegisters) {
          k_a = k_fragment[kk];
          v_a = v_fragment[kk];
        } else {
          k_a = load_a(k_tile + warp * 16 * kStride + kk * 16, kStride, lane);
          v_a = load_a(v_tile + warp * 16 * kStride + kk * 16, kStride, lane);
        }
#pragma unroll
        for (int pair = 0; pair < Shape::kQueryTiles / 2; ++pair) {
          FragmentB first, second;
          load_b_pair(first, second, q_tile + pair * 16 * kStride + kk * 16, kStride, lane);
          mma_bf16_16x8x16(s[2 * pair], k_a, first);
          mma_bf16_16x8x16(s[2 * pair + 1], k_a, second);
          load_b_pair(first, second, do_tile + pair * 16 * kStride + kk * 16, kStride, lane);
          mma_bf16_16x8x16(dp[2 * pair], v_a, first);
          mma_bf16_16x8x16(dp[2 * pair + 1], v_a, second);
        }
      }
      const bool needs_mask = warp_first_key + 15 > first_query;
#pragma unroll
      for (int nt = 0; nt < Shape::kQueryTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = warp_first_key + group_row + (e >= 2 ? 8 : 0);
          const int local_query = nt * 8 + 2 * group_column + (e & 1);
          const int query = first_query + local_query;
          float p = exp2f(s[nt].value[e] * scale_log2 - lse_tile[local_query]);
          if ((needs_mask && key > query) || query >= seq) p = 0.0f;
          s[nt].value[e] = p;
          dp[nt].value[e] = p * (dp[nt].value[e] - dot_tile[local_query]);
        }
      }
#pragma unroll
      for (int kq = 0; kq < kBlockQ / 16; ++kq) {
        const FragmentA p_a = a_from_c_pair(s[2 * kq], s[2 * kq + 1]);
        const FragmentA ds_a = a_from_c_pair(dp[2 * kq], dp[2 * kq + 1]);
#pragma unroll
        for (int pair = 0; pair < Shape::kDimTiles / 2; ++pair) {
          FragmentB first, second;
          load_b_pair_transposed(first, second, do_tile + kq * 16 * kStride + pair * 16, kStride,
                                 lane);
          mma_bf16_16x8x16(dv[2 * pair], p_a, first);
          mma_bf16_16x8x16(dv[2 * pair + 1], p_a, second);
          load_b_pair_transposed(first, second, q_tile + kq * 16 * kStride + pair * 16, kStride,
                                 lane);
          mma_bf16_16x8x16(dk[2 * pair], ds_a, first);
          mma_bf16_16x8x16(dk[2 * pair + 1], ds_a, second);
        }
      }
      bf16* ds_row = ds_tile + (warp * 16 + group_row) * Shape::kScoreStride;
#pragma unroll
      for (int nt = 0; nt < Shape::kQueryTiles; ++nt) {
        *reinterpret_cast<__nv_bfloat162*>(ds_row + nt * 8 + 2 * group_column) =
            __floats2bfloat162_rn(dp[nt].value[0], dp[nt].value[1]);
        *reinterpret_cast<__nv_bfloat162*>(ds_row + 8 * Shape::kScoreStride + nt * 8 +
                                           2 * group_column) =
            __floats2bfloat162_rn(dp[nt].value[2], dp[nt].value[3]);
      }
    } else {
      for (int i = lane; i < 16 * kBlockQ; i += 32) {
        ds_tile[(warp * 16 + i / kBlockQ) * Shape::kScoreStride + i % kBlockQ] =
            __float2bfloat16(0.0f);
      }
    }
    __syncthreads();  // dSᵀ of all 64 keys is in shared memory
    {
      const int row_tile = warp % Shape::kDqRowTiles;
      const int first_column = (warp / Shape::kDqRowTiles) * Shape::kDqColumns;
      FragmentC dq[Shape::kDqDimTiles];
#pragma unroll
      for (int dt = 0; dt < Shape::kDqDimTiles; ++dt) zero(dq[dt]);
#pragma unroll
      for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
        const FragmentA ds_a = load_a_transposed(
            ds_tile + kk * 16 * Shape::kScoreStride + row_tile * 16, Shape::kScoreStride, lane);
#pragma unroll
        for (int pair = 0; pair < Shape::kDqDimTiles / 2; ++pair) {
          FragmentB first, second;
          load_b_pair_transposed(
              first, second, k_tile + kk * 16 * kStride + first_column + pair * 16, kStride, lane);
          mma_bf16_16x8x16(dq[2 * pair], ds_a, first);
          mma_bf16_16x8x16(dq[2 * pair + 1], ds_a, second);
        }
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int query = first_query + row_tile * 16 + group_row + half * 8;
        if (query >= seq) continue;
        float* row = dq_accumulator + (static_cast<std::int64_t>(batch) * seq + query) * out_width +
                     static_cast<std::int64_t>(head) * D + first_column + 2 * group_column;
#pragma unroll
        for (int dt = 0; dt < Shape::kDqDimTiles; ++dt) {
#if __CUDA_ARCH__ >= 900
          // One 8-byte atomic for the two neighbouring columns (sm_90's vector atomics).
          atomicAdd(
              reinterpret_cast<float2*>(row + dt * 8),
              make_float2(dq[dt].value[half * 2] * scale, dq[dt].value[half * 2 + 1] * scale));
#else
          atomicAdd(row + dt * 8, dq[dt].value[half * 2] * scale);
          atomicAdd(row + dt * 8 + 1, dq[dt].value[half * 2 + 1] * scale);
#endif
        }
      }
    }
    if (pair + 1 < pairs && threadIdx.x < kBlockQ) {
      lse_tiles[(buffer ^ 1) * kBlockQ + threadIdx.x] = next_lse;
      dot_tiles[(buffer ^ 1) * kBlockQ + threadIdx.x] = next_dot;
    }
    __syncthreads();  // this pair's Q, dO and dSᵀ tiles are free for the pair after next
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int key = warp_first_key + group_row + half * 8;
    if (key >= seq) continue;
    bf16* row = dqkv + (static_cast<std::int64_t>(batch) * seq + key) * width;
#pragma unroll
    for (int dt = 0; dt < Shape::kDimTiles; ++dt) {
      const int column = dt * 8 + 2 * group_column;
      auto* k_pair = reinterpret_cast<__nv_bfloat162*>(row + k_column + column);
      auto* v_pair = reinterpret_cast<__nv_bfloat162*>(row + v_column + column);
      const float2 k_old = __bfloat1622float2(*k_pair);
      const float2 v_old = __bfloat1622float2(*v_pair);
      *k_pair = __floats2bfloat162_rn(k_old.x + dk[dt].value[half * 2] * scale,
                                      k_old.y + dk[dt].value[half * 2 + 1] * scale);
      *v_pair = __floats2bfloat162_rn(v_old.x + dv[dt].value[half * 2],
                                      v_old.y + dv[dt].value[half * 2 + 1]);
    }
  }
}

template <int D>
void launch_backward(const void* dout, const void* qkv, const float* lse, const float* row_dot,
                     void* dqkv, float* dq_accumulator, const AttentionDims& dims) {
  using Shape = BackwardShape<D>;
  static bool configured = false;
  if (!configured) {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(flash_backward_kernel<D>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           Shape::kSharedBytes));
    configured = true;
  }
  const dim3 grid(ceil_div(dims.seq, kBlockKeys),
                  static_cast<unsigned>(dims.batch * dims.num_kv_heads));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  flash_backward_kernel<D><<<grid, kThreads, Shape::kSharedBytes, current_stream()>>>(
      static_cast<const bf16*>(dout), static_cast<const bf16*>(qkv), lse, row_dot,
      static_cast<bf16*>(dqkv), dq_accumulator, static_cast<int>(dims.seq),
      static_cast<int>(dims.num_heads), static_cast<int>(dims.num_kv_heads), scale, scale * kLog2e);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_flash_attention_backward(const void* dout, const void* qkv, const float* lse,
                                     const float* row_dot, void* dqkv, float* dq_accumulator,
                                     const AttentionDims& dims) {
  if (dims.batch * dims.seq == 0) return;
  if (dims.head_dim == 64) {
    launch_backward<64>(dout, qkv, lse, row_dot, dqkv, dq_accumulator, dims);
  } else if (dims.head_dim == 128) {
    launch_backward<128>(dout, qkv, lse, row_dot, dqkv, dq_accumulator, dims);
  } else {
    fail_unsupported("flash_attention_backward", "head_dim must be 64 or 128");
  }
}

}  // namespace strata::executor::cuda
