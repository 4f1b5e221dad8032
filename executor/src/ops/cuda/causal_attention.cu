// Causal attention launchers: the tensor-core kernels where they apply (flash_attention_*.cu),
// otherwise a warp-per-query kernel in float32 arithmetic — float32 training, the tests' exact
// comparisons with the CPU, and head dims the tensor-core kernels do not cover. Both keep no
// [seq, seq] matrix: only the output and one log-sum-exp per query.
#include "../../cuda/device_math.cuh"
#include "../../cuda/device_memory.h"
#include "causal_attention.cuh"
#include "flash_attention.cuh"

namespace strata::executor::cuda {
namespace {

constexpr int kMaxDimsPerLane = 8;  // head_dim ≤ 256
constexpr int kWarpsPerBlock = 4;

struct HeadLayout {
  std::int64_t width;      // elements per qkv row
  std::int64_t out_width;  // elements per output row
  int num_heads, num_kv_heads, head_dim, seq;
  __device__ std::int64_t q_column(int head) const {
    return static_cast<std::int64_t>(head) * head_dim;
  }
  __device__ std::int64_t k_column(int head) const {
    return static_cast<std::int64_t>(num_heads + head / (num_heads / num_kv_heads)) * head_dim;
  }
  __device__ std::int64_t v_column(int head) const {
    return static_cast<std::int64_t>(num_heads + num_kv_heads + head / (num_heads / num_kv_heads)) *
           head_dim;
  }
};

HeadLayout layout_of(const AttentionDims& dims) {
  return HeadLayout{dims.qkv_width(),
                    dims.output_width(),
                    static_cast<int>(dims.num_heads),
                    static_cast<int>(dims.num_kv_heads),
                    static_cast<int>(dims.head_dim),
                    static_cast<int>(dims.seq)};
}

// Lane l holds dimensions l, l + 32, … of a head row.
template <class T>
__device__ __forceinline__ void load_row(const T* row, int head_dim, int lane,
                                         float (&values)[kMaxDimsPerLane]) {
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) {
    const int d = lane + 32 * j;
    values[j] = d < head_dim ? to_float(row[d]) : 0.0f;
  }
}

__device__ __forceinline__ float dot(const float (&a)[kMaxDimsPerLane],
                                     const float (&b)[kMaxDimsPerLane]) {
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) sum += a[j] * b[j];
  return warp_sum(sum);
}

// One warp per (batch, head, query): online softmax over keys 0..query.
template <class T>
__global__ void attention_forward_kernel(const T* qkv, T* out, float* lse, HeadLayout layout,
                                         std::int64_t queries, float scale) {
  const std::int64_t item =
      blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= queries) return;
  const int t = static_cast<int>(item % layout.seq);
  const int head = static_cast<int>((item / layout.seq) % layout.num_heads);
  const std::int64_t batch = item / (static_cast<std::int64_t>(layout.seq) * layout.num_heads);
  const T* rows = qkv + batch * layout.seq * layout.width;
  float q[kMaxDimsPerLane], k[kMaxDimsPerLane], v[kMaxDimsPerLane], acc[kMaxDimsPerLane];
  load_row(rows + t * layout.width + layout.q_column(head), layout.head_dim, lane, q);
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) acc[j] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int s = 0; s <= t; ++s) {
    load_row(rows + s * layout.width + layout.k_column(head), layout.head_dim, lane, k);
    load_row(rows + s * layout.width + layout.v_column(head), layout.head_dim, lane, v);
    const float x = dot(q, k) * scale;
    const float new_max = fmaxf(running_max, x);
    const float rescale = expf(running_max - new_max);
    const float p = expf(x - new_max);
    running_sum = running_sum * rescale + p;
#pragma unroll
    for (int j = 0; j < kMaxDimsPerLane; ++j) acc[j] = acc[j] * rescale + p * v[j];
    running_max = new_max;
  }
  T* row = out + (batch * layout.seq + t) * layout.out_width + layout.q_column(head);
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) {
    const int d = lane + 32 * j;
    if (d < layout.head_dim) row[d] = from_float<T>(acc[j] / running_sum);
  }
  if (lane == 0) {
    lse[(batch * layout.num_heads + head) * layout.seq + t] = running_max + logf(running_sum);
  }
}

// row_dot[b, h, t] = Σ_d dout·out: the softmax backward's row term.
template <class T>
__global__ void attention_row_dot_kernel(const T* dout, const T* out, float* row_dot,
                                         HeadLayout layout, std::int64_t queries) {
  const std::int64_t item =
      blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= queries) return;
  const int t = static_cast<int>(item % layout.seq);
  const int head = static_cast<int>((item / layout.seq) % layout.num_heads);
  const std::int64_t batch = item / (static_cast<std::int64_t>(layout.seq) * layout.num_heads);
  const std::int64_t offset = (batch * layout.seq + t) * layout.out_width + layout.q_column(head);
  float sum = 0.0f;
  for (int d = lane; d < layout.head_dim; d += 32) {
    sum += to_float(dout[offset + d]) * to_float(out[offset + d]);
  }
  sum = warp_sum(sum);
  if (lane == 0) row_dot[(batch * layout.num_heads + head) * layout.seq + t] = sum;
}

// dq of one (batch, head, query): Σ over keys s ≤ t of dS·k.
template <class T>
__global__ void attention_backward_query_kernel(const T* dout, const T* qkv, const float* lse,
                                                const float* row_dot, T* dqkv, HeadLayout layout,
                                                std::int64_t queries, float scale) {
  const std::int64_t item =
      blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= queries) return;
  const int t = static_cast<int>(item % layout.seq);
  const int head = static_cast<int>((item / layout.seq) % layout.num_heads);
  const std::int64_t batch = item / (static_cast<std::int64_t>(layout.seq) * layout.num_heads);
  const T* rows = qkv + batch * layout.seq * layout.width;
  const std::int64_t stat = (batch * layout.num_heads + head) * layout.seq + t;
  float q[kMaxDimsPerLane], grad_out[kMaxDimsPerLane], k[kMaxDimsPerLane], v[kMaxDimsPerLane],
      dq[kMaxDimsPerLane];
  load_row(rows + t * layout.width + layout.q_column(head), layout.head_dim, lane, q);
  load_row(dout + (batch * layout.seq + t) * layout.out_width + layout.q_column(head),
           layout.head_dim, lane, grad_out);
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) dq[j] = 0.0f;
  const float row_lse = lse[stat];
  const float row_term = row_dot[stat];
  for (int s = 0; s <= t; ++s) {
    load_row(rows + s * layout.width + layout.k_column(head), layout.head_dim, lane, k);
    load_row(rows + s * layout.width + layout.v_column(head), layout.head_dim, lane, v);
    const float p = expf(dot(q, k) * scale - row_lse);
    const float ds = p * (dot(grad_out, v) - row_term);
#pragma unroll
    for (int j = 0; j < kMaxDimsPerLane; ++j) dq[j] += ds * k[j];
  }
  T* row = dqkv + (batch * layout.seq + t) * layout.width + layout.q_column(head);
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) {
    const int d = lane + 32 * j;
    if (d < layout.head_dim) row[d] = from_float<T>(to_float(row[d]) + dq[j] * scale);
  }
}

// dk and dv of one (batch, kv head, key): Σ over the group's query heads and queries t ≥ s.
template <class T>
__global__ void attention_backward_key_kernel(const T* dout, const T* qkv, const float* lse,
                                              const float* row_dot, T* dqkv, HeadLayout layout,
                                              std::int64_t keys, float scale) {
  const std::int64_t item =
      blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= keys) return;
  const int s = static_cast<int>(item % layout.seq);
  const int kv_head = static_cast<int>((item / layout.seq) % layout.num_kv_heads);
  const std::int64_t batch = item / (static_cast<std::int64_t>(layout.seq) * layout.num_kv_heads);
  const int group = layout.num_heads / layout.num_kv_heads;
  const T* rows = qkv + batch * layout.seq * layout.width;
  const int first_head = kv_head * group;
  float k[kMaxDimsPerLane], v[kMaxDimsPerLane], q[kMaxDimsPerLane], grad_out[kMaxDimsPerLane],
      dk[kMaxDimsPerLane], dv[kMaxDimsPerLane];
  load_row(rows + s * layout.width + layout.k_column(first_head), layout.head_dim, lane, k);
  load_row(rows + s * layout.width + layout.v_column(first_head), layout.head_dim, lane, v);
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) dk[j] = dv[j] = 0.0f;
  for (int head = first_head; head < first_head + group; ++head) {
    for (int t = s; t < layout.seq; ++t) {
      const std::int64_t stat = (batch * layout.num_heads + head) * layout.seq + t;
      load_row(rows + t * layout.width + layout.q_column(head), layout.head_dim, lane, q);
      load_row(dout + (batch * layout.seq + t) * layout.out_width + layout.q_column(head),
               layout.head_dim, lane, grad_out);
      const float p = expf(dot(q, k) * scale - lse[stat]);
      const float ds = p * (dot(grad_out, v) - row_dot[stat]);
#pragma unroll
      for (int j = 0; j < kMaxDimsPerLane; ++j) {
        dv[j] += p * grad_out[j];
        dk[j] += ds * q[j];
      }
    }
  }
  T* row = dqkv + (batch * layout.seq + s) * layout.width;
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) {
    const int d = lane + 32 * j;
    if (d >= layout.head_dim) continue;
    T* k_out = row + layout.k_column(first_head) + d;
    T* v_out = row + layout.v_column(first_head) + d;
    *k_out = from_float<T>(to_float(*k_out) + dk[j] * scale);
    *v_out = from_float<T>(to_float(*v_out) + dv[j]);
  }
}

// dqkv's q columns += the tensor-core backward's float32 dQ accumulator.
__global__ void add_query_gradient_kernel(const float* dq_accumulator, bf16* dqkv,
                                          HeadLayout layout, std::int64_t tokens) {
  const std::int64_t total = tokens * layout.out_width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t token = i / layout.out_width;
    const std::int64_t column = i - token * layout.out_width;
    bf16* target = dqkv + token * layout.width + column;
    *target = __float2bfloat16(__bfloat162float(*target) + dq_accumulator[i]);
  }
}

bool use_tensor_cores(const AttentionDims& dims, ScalarType type) {
  return type == ScalarType::bfloat16 && flash_attention_supports(dims.head_dim);
}

unsigned warp_blocks(std::int64_t items) { return ceil_div(items, kWarpsPerBlock); }

}  // namespace

void launch_causal_attention_forward(const void* qkv, void* out, float* lse,
                                     const AttentionDims& dims, ScalarType type) {
  if (dims.head_dim > 32 * kMaxDimsPerLane) {
    fail_unsupported("causal_attention_forward", "head_dim above 256");
  }
  if (use_tensor_cores(dims, type)) {
    launch_flash_attention_forward(qkv, out, lse, dims);
    return;
  }
  const std::int64_t queries = dims.batch * dims.num_heads * dims.seq;
  if (queries == 0) return;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims.head_dim)));
  dispatch_cuda_type(type, "causal_attention_forward", [&]<class T>() {
    attention_forward_kernel<T><<<warp_blocks(queries), 32 * kWarpsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(qkv), static_cast<T*>(out), lse, layout_of(dims), queries, scale);
    STRATA_CUDA_CHECK_LAUNCH();
  });
}

void launch_causal_attention_backward(const void* dout, const void* qkv, const void* out,
                                      const float* lse, void* dqkv, const AttentionDims& dims,
                                      ScalarType type) {
  if (dims.head_dim > 32 * kMaxDimsPerLane) {
    fail_unsupported("causal_attention_backward", "head_dim above 256");
  }
  const std::int64_t queries = dims.batch * dims.num_heads * dims.seq;
  if (queries == 0) return;
  const cudaStream_t stream = current_stream();
  const HeadLayout layout = layout_of(dims);
  auto* row_dot = static_cast<float*>(device_allocate(static_cast<std::size_t>(queries) * 4));
  dispatch_cuda_type(type, "causal_attention_backward", [&]<class T>() {
    attention_row_dot_kernel<T><<<warp_blocks(queries), 32 * kWarpsPerBlock, 0, stream>>>(
        static_cast<const T*>(dout), static_cast<const T*>(out), row_dot, layout, queries);
    STRATA_CUDA_CHECK_LAUNCH();
  });
  if (use_tensor_cores(dims, type)) {
    const std::int64_t tokens = dims.batch * dims.seq;
    const std::size_t accumulator_bytes =
        static_cast<std::size_t>(tokens * dims.output_width()) * sizeof(float);
    auto* dq = static_cast<float*>(device_allocate(accumulator_bytes));
    STRATA_CUDA_CHECK(cudaMemsetAsync(dq, 0, accumulator_bytes, stream));
    launch_flash_attention_backward(dout, qkv, lse, row_dot, dqkv, dq, dims);
    add_query_gradient_kernel<<<grid_blocks(tokens * dims.output_width(), 256), 256, 0, stream>>>(
        dq, static_cast<bf16*>(dqkv), layout, tokens);
    STRATA_CUDA_CHECK_LAUNCH();
    device_release(dq);
  } else {
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims.head_dim)));
    const std::int64_t keys = dims.batch * dims.num_kv_heads * dims.seq;
    dispatch_cuda_type(type, "causal_attention_backward", [&]<class T>() {
      attention_backward_query_kernel<T><<<warp_blocks(queries), 32 * kWarpsPerBlock, 0, stream>>>(
          static_cast<const T*>(dout), static_cast<const T*>(qkv), lse, row_dot,
          static_cast<T*>(dqkv), layout, queries, scale);
      STRATA_CUDA_CHECK_LAUNCH();
      attention_backward_key_kernel<T><<<warp_blocks(keys), 32 * kWarpsPerBlock, 0, stream>>>(
          static_cast<const T*>(dout), static_cast<const T*>(qkv), lse, row_dot,
          static_cast<T*>(dqkv), layout, keys, scale);
      STRATA_CUDA_CHECK_LAUNCH();
    });
  }
  device_release(row_dot);
}

}  // namespace strata::executor::cuda
