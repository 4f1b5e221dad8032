// Causal GQA attention forward on tensor cores (bfloat16, head_dim 64 or 128), in the manner of
// FlashAttention-2: a CTA of 4 warps owns a block of queries and walks the key blocks up to the
// diagonal; each warp keeps its queries' scores, running max, running sum and output in
// registers (mma.sync m16n8k16, layouts in warp_mma.cuh) and never writes the scores anywhere.
//
//   CTA (query block, batch·head)          per key block j:
//   ┌ warp 0: 16·R query rows ┐            S = Q·K_jᵀ          (registers, fp32)
//   │ warp 1                  │  K_j, V_j  m, l, O rescaled   (online softmax, base-2)
//   │ warp 2                  │  ───────►  O += P·V_j         (P from S's registers as bf16)
//   └ warp 3                  ┘  (smem)    K_{j+1}, V_{j+1} copied in behind the math (cp.async)
//
// R = 2 row tiles for head_dim 64 (128 queries a CTA), 1 for 128 (64 queries), which keeps the
// accumulators in registers. Shared-memory rows are padded by 16 bytes so ldmatrix's eight row
// reads fall in different banks.
#include <cuda_bf16.h>

#include "../../cuda/device_math.cuh"
#include "../../cuda/warp_mma.cuh"
#include "flash_attention.cuh"

namespace strata::executor::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockN = 64;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
struct ForwardShape {
  static constexpr int kRowTiles = D == 64 ? 2 : 1;  // 16-row MMA tiles per warp
  static constexpr int kBlockM = kWarps * 16 * kRowTiles;
  static constexpr int kStride = D + 8;  // bf16 elements per shared-memory row
  static constexpr int kDepthSteps = D / 16;
  static constexpr int kKeyTiles = kBlockN / 8;
  static constexpr int kDimTiles = D / 8;
  static constexpr int kSharedBytes = (kBlockM + 2 * kBlockN) * kStride * 2;
};

// Rows [first_row, first_row + Rows) of a head (D columns; `width` elements between rows) into
// shared memory, asynchronously; rows at or past `seq` become zeros.
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

template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(const bf16* qkv, bf16* out, float* lse, int seq, int num_heads,
                         int num_kv_heads, float scale_log2) {
  using Shape = ForwardShape<D>;
  constexpr int kStride = Shape::kStride;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  bf16* q_tile = reinterpret_cast<bf16*>(shared_bytes);
  bf16* k_tile = q_tile + Shape::kBlockM * kStride;
  bf16* v_tile = k_tile + kBlockN * kStride;

  const std::int64_t width = static_cast<std::int64_t>(num_heads + 2 * num_kv_heads) * D;
  const std::int64_t out_width = static_cast<std::int64_t>(num_heads) * D;
  const int query_block = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
  const int batch = static_cast<int>(blockIdx.y) / num_heads;
  const int head = static_cast<int>(blockIdx.y) % num_heads;
  const int kv_head = head / (num_heads / num_kv_heads);
  const int first_query = query_block * Shape::kBlockM;
  const bf16* rows = qkv + static_cast<std::int64_t>(batch) * seq * width;
  const bf16* q_head = rows + static_cast<std::int64_t>(head) * D;
  const bf16* k_head = rows + static_cast<std::int64_t>(num_heads + kv_head) * D;
  const bf16* v_head = rows + static_cast<std::int64_t>(num_heads + num_kv_heads + kv_head) * D;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group_row = lane / 4;
  const int group_column = lane % 4;
  const int warp_row = warp * 16 * Shape::kRowTiles;  // first query row of this warp in the tile
  const int warp_first_query = first_query + warp_row;
  const int warp_last_query = warp_first_query + 16 * Shape::kRowTiles - 1;
  const int key_end = min(first_query + Shape::kBlockM, seq);
  const int key_blocks = (key_end + kBlockN - 1) / kBlockN;

  copy_tile_async<D, Shape::kBlockM>(q_tile, q_head, width, first_query, seq);
  copy_tile_async<D, kBlockN>(k_tile, k_head, width, 0, seq);
  copy_async_commit();
  copy_tile_async<D, kBlockN>(v_tile, v_head, width, 0, seq);
  copy_async_commit();

  FragmentA q[Shape::kRowTiles][Shape::kDepthSteps];
  FragmentC o[Shape::kRowTiles][Shape::kDimTiles];
  float row_max[Shape::kRowTiles][2];
  float row_sum[Shape::kRowTiles][2];
#pragma unroll
  for (int mt = 0; mt < Shape::kRowTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < Shape::kDimTiles; ++dt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt].value[e] = 0.0f;
    }
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }

  for (int block = 0; block < key_blocks; ++block) {
    const int first_key = block * kBlockN;
    copy_async_wait<1>();  // Q (first time) and K_j have landed; V_j may still be on its way
    __syncthreads();
    if (block == 0) {
#pragma unroll
      for (int mt = 0; mt < Shape::kRowTiles; ++mt) {
#pragma unroll
        for (int kk = 0; kk < Shape::kDepthSteps; ++kk) {
          q[mt][kk] = load_a(q_tile + (warp_row + mt * 16) * kStride + kk * 16, kStride, lane);
        }
      }
    }
    // A warp whose queries all precede this key block has nothing to add (warp-uniform).
    const bool active = first_key <= warp_last_query;
    FragmentC s[Shape::kRowTiles][Shape::kKeyTiles];
    if (active) {
#pragma unroll
      for (int mt = 0; mt < Shape::kRowTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < Shape::kKeyTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt].value[e] = 0.0f;
        }
      }
#pragma unroll
      for (int kk = 0; kk < Shape::kDepthSteps; ++kk) {
#pragma unroll
        for (int pair = 0; pair < Shape::kKeyTiles / 2; ++pair) {
          FragmentB first, second;
          load_b_pair(first, second, k_tile + pair * 16 * kStride + kk * 16, kStride, lane);
#pragma unroll
          for (int mt = 0; mt < Shape::kRowTiles; ++mt) {
            mma_bf16_16x8x16(s[mt][2 * pair], q[mt][kk], first);
            mma_bf16_16x8x16(s[mt][2 * pair + 1], q[mt][kk], second);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with K_j
    if (block + 1 < key_blocks) {
      copy_tile_async<D, kBlockN>(k_tile, k_head, width, first_key + kBlockN, seq);
    }
    copy_async_commit();
    if (active) {
      const bool needs_mask = first_key + kBlockN - 1 > warp_first_query;
#pragma unroll
      for (int mt = 0; mt < Shape::kRowTiles; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int query = warp_first_query + mt * 16 + group_row + half * 8;
          float local_max = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < Shape::kKeyTiles; ++nt) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float x = s[mt][nt].value[half * 2 + e] * scale_log2;
              const int key = first_key + nt * 8 + 2 * group_column + e;
              if (needs_mask && key > query) x = -INFINITY;
              s[mt][nt].value[half * 2 + e] = x;
              local_max = fmaxf(local_max, x);
            }
          }
          local_max = fmaxf(local_max, __shfl_xor_sync(0xFFFFFFFFu, local_max, 1));
          local_max = fmaxf(local_max, __shfl_xor_sync(0xFFFFFFFFu, local_max, 2));
          const float new_max = fmaxf(row_max[mt][half], local_max);
          // Every row has seen key 0 by now, so new_max is finite.
          const float rescale = exp2f(row_max[mt][half] - new_max);
          row_max[mt][half] = new_max;
          float sum = 0.0f;
#pragma unroll
          for (int nt = 0; nt < Shape::kKeyTiles; ++nt) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float p = exp2f(s[mt][nt].value[half * 2 + e] - new_max);
              s[mt][nt].value[half * 2 + e] = p;
              sum += p;
            }
          }
          row_sum[mt][half] = row_sum[mt][half] * rescale + sum;
#pragma unroll
          for (int dt = 0; dt < Shape::kDimTiles; ++dt) {
            o[mt][dt].value[half * 2] *= rescale;
            o[mt][dt].value[half * 2 + 1] *= rescale;
          }
        }
      }
    }
    copy_async_wait<1>();  // V_j has landed
    __syncthreads();
    if (active) {
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        FragmentA p[Shape::kRowTiles];
#pragma unroll
        for (int mt = 0; mt < Shape::kRowTiles; ++mt) {
          p[mt] = a_from_c_pair(s[mt][2 * kk], s[mt][2 * kk + 1]);
        }
#pragma unroll
        for (int pair = 0; pair < Shape::kDimTiles / 2; ++pair) {
          FragmentB first, second;
          load_b_pair_transposed(first, second, v_tile + kk * 16 * kStride + pair * 16, kStride,
                                 lane);
#pragma unroll
          for (int mt = 0; mt < Shape::kRowTiles; ++mt) {
            mma_bf16_16x8x16(o[mt][2 * pair], p[mt], first);
            mma_bf16_16x8x16(o[mt][2 * pair + 1], p[mt], second);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with V_j
    if (block + 1 < key_blocks) {
      copy_tile_async<D, kBlockN>(v_tile, v_head, width, first_key + kBlockN, seq);
    }
    copy_async_commit();
  }
  copy_async_wait<0>();

#pragma unroll
  for (int mt = 0; mt < Shape::kRowTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float total = row_sum[mt][half];
      total += __shfl_xor_sync(0xFFFFFFFFu, total, 1);
      total += __shfl_xor_sync(0xFFFFFFFFu, total, 2);
      const int query = warp_first_query + mt * 16 + group_row + half * 8;
      if (query >= seq) continue;
      const float inverse = 1.0f / total;
      bf16* row = out + (static_cast<std::int64_t>(batch) * seq + query) * out_width +
                  static_cast<std::int64_t>(head) * D;
#pragma unroll
      for (int dt = 0; dt < Shape::kDimTiles; ++dt) {
        *reinterpret_cast<__nv_bfloat162*>(row + dt * 8 + 2 * group_column) = __floats2bfloat162_rn(
            o[mt][dt].value[half * 2] * inverse, o[mt][dt].value[half * 2 + 1] * inverse);
      }
      if (group_column == 0) {
        lse[(static_cast<std::int64_t>(batch) * num_heads + head) * seq + query] =
            (row_max[mt][half] + log2f(total)) * kLn2;
      }
    }
  }
}

template <int D>
void launch_forward(const void* qkv, void* out, float* lse, const AttentionDims& dims) {
  using Shape = ForwardShape<D>;
  static bool configured = false;
  if (!configured) {
    STRATA_CUDA_CHECK(cudaFuncSetAttribute(
        flash_forward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSharedBytes));
    configured = true;
  }
  const dim3 grid(ceil_div(dims.seq, Shape::kBlockM),
                  static_cast<unsigned>(dims.batch * dims.num_heads));
  const float scale_log2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))) * kLog2e;
  flash_forward_kernel<D><<<grid, kThreads, Shape::kSharedBytes, current_stream()>>>(
      static_cast<const bf16*>(qkv), static_cast<bf16*>(out), lse, static_cast<int>(dims.seq),
      static_cast<int>(dims.num_heads), static_cast<int>(dims.num_kv_heads), scale_log2);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool flash_attention_supports(std::int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

void launch_flash_attention_forward(const void* qkv, void* out, float* lse,
                                    const AttentionDims& dims) {
  if (dims.batch * dims.seq == 0) return;
  if (dims.head_dim == 64) {
    launch_forward<64>(qkv, out, lse, dims);
  } else if (dims.head_dim == 128) {
    launch_forward<128>(qkv, out, lse, dims);
  } else {
    fail_unsupported("flash_attention_forward", "head_dim must be 64 or 128");
  }
}

}  // namespace strata::executor::cuda
