#include "strata/executor/ops/causal_attention.h"

#include <algorithm>
#include <cmath>

#include "cuda/causal_attention.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

constexpr std::int64_t kQueryBlock = 64;

void check_shapes(const char* op, const Tensor& qkv, const AttentionShape& shape, const Tensor& out,
                  const Tensor& lse) {
  STRATA_CHECK(shape.num_heads % shape.num_kv_heads == 0, "{}: {} heads over {} kv heads", op,
               shape.num_heads, shape.num_kv_heads);
  STRATA_CHECK(qkv.dim() == 3 && qkv.size(2) == shape.qkv_width(), "{}: qkv {} for width {}", op,
               shape_to_string(qkv.shape()), shape.qkv_width());
  const std::int64_t tokens = qkv.size(0) * qkv.size(1);
  STRATA_CHECK(
      out.numel() == tokens * shape.output_width() && lse.numel() == tokens * shape.num_heads,
      "{}: out {} lse {}", op, shape_to_string(out.shape()), shape_to_string(lse.shape()));
}

// A block of queries [first, first + rows) and the keys [key_begin, first + rows) its rows see:
// all earlier keys, or under a window only those its band reaches.
struct QueryBlock {
  std::int64_t first = 0;
  std::int64_t rows = 0;
  std::int64_t key_begin = 0;
  QueryBlock(std::int64_t first_query, std::int64_t count, std::int64_t window)
      : first(first_query),
        rows(count),
        key_begin(window > 0 ? std::max<std::int64_t>(0, first_query - window + 1) : 0) {}
  std::int64_t keys() const { return first + rows - key_begin; }
  // Row i's visible keys as columns [begin, end) of the block's scores.
  std::int64_t visible_begin(std::int64_t i, std::int64_t window) const {
    return window > 0 ? std::max<std::int64_t>(0, first + i - window + 1) - key_begin : 0;
  }
  std::int64_t visible_end(std::int64_t i) const { return first + i + 1 - key_begin; }
};

// Scaled scores of the block's queries against its keys. Entries outside a row's visible keys
// are garbage here: callers use only [visible_begin, visible_end) of row i and zero the rest.
// (Writing −∞ there and exponentiating would leave Eigen's clamped exp(−88) ≈ FLT_MIN, which
// turns denormal after normalisation and slows every later GEMM 25×.)
template <class T>
cpu::RowMatrix<T> block_scores(const cpu::ConstStridedMap<T>& q, const cpu::ConstStridedMap<T>& k,
                               const QueryBlock& block, T scale) {
  return (q.middleRows(block.first, block.rows) *
          k.middleRows(block.key_begin, block.keys()).transpose()) *
         scale;
}

// ALiBi: score(first + i, j) −= slope·(first + i − j) on the visible keys of each row.
template <class T>
void add_position_bias(cpu::RowMatrix<T>& scores, const QueryBlock& block, std::int64_t window,
                       double slope) {
  if (slope == 0) return;
  for (std::int64_t i = 0; i < scores.rows(); ++i) {
    for (std::int64_t c = block.visible_begin(i, window); c < block.visible_end(i); ++c) {
      const std::int64_t distance = block.first + i - (block.key_begin + c);
      scores(i, c) -= static_cast<T>(slope * static_cast<double>(distance));
    }
  }
}

// Keeps row i's visible scores and zeroes the rest of the row.
template <class T>
void zero_invisible(cpu::RowMatrix<T>& p, std::int64_t i, std::int64_t begin, std::int64_t end) {
  p.row(i).head(begin).setZero();
  p.row(i).tail(p.cols() - end).setZero();
}

cuda::AttentionDims cuda_dims(const Tensor& qkv, const AttentionShape& shape) {
  STRATA_CHECK(shape.alibi_heads == 0 && shape.window == 0,
               "causal attention on CUDA takes no ALiBi bias and no sliding window");
  return cuda::AttentionDims{qkv.size(0), qkv.size(1), shape.num_heads, shape.num_kv_heads,
                             shape.head_dim};
}

}  // namespace

double alibi_slope(std::int64_t head, std::int64_t heads) {
  STRATA_CHECK(heads > 0 && head >= 0 && head < heads, "ALiBi slope of head {} of {}", head, heads);
  std::int64_t power = 1;
  while (power * 2 <= heads) power *= 2;
  const auto of_power = [](std::int64_t i, std::int64_t n) {
    return std::exp2(-8.0 * static_cast<double>(i + 1) / static_cast<double>(n));
  };
  if (head < power) return of_power(head, power);
  return of_power(2 * (head - power), 2 * power);
}

void causal_attention_forward(const Tensor& qkv, const AttentionShape& shape, Tensor& out,
                              Tensor& lse) {
  check_shapes("causal_attention_forward", qkv, shape, out, lse);
  if (on_cuda("causal_attention_forward", {&qkv, &out, &lse})) {
    const ScalarType type = check_cuda_types("causal_attention_forward", {&qkv, &out}, {&lse});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_causal_attention_forward(qkv.raw(), out.raw(), lse.data<float>(),
                                            cuda_dims(qkv, shape), type);
    }
    return;
  }
  check_cpu_same_type("causal_attention_forward", {&qkv, &out, &lse});
  const std::int64_t batch = qkv.size(0);
  const std::int64_t seq = qkv.size(1);
  const std::int64_t width = shape.qkv_width();
  const std::int64_t d = shape.head_dim;
  dispatch_floating(qkv.scalar_type(), "causal_attention_forward", [&]<class T>() {
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
    for (std::int64_t b = 0; b < batch; ++b) {
      const T* rows = qkv.data<T>() + b * seq * width;
      for (std::int64_t h = 0; h < shape.num_heads; ++h) {
        const Eigen::OuterStride<> row_stride(width);
        const cpu::ConstStridedMap<T> q(rows + shape.q_column(h), seq, d, row_stride);
        const cpu::ConstStridedMap<T> k(rows + shape.k_column(h), seq, d, row_stride);
        const cpu::ConstStridedMap<T> v(rows + shape.v_column(h), seq, d, row_stride);
        cpu::StridedMap<T> o(out.data<T>() + b * seq * shape.output_width() + h * d, seq, d,
                             Eigen::OuterStride<>(shape.output_width()));
        T* lse_row = lse.data<T>() + (b * shape.num_heads + h) * seq;
        for (std::int64_t first = 0; first < seq; first += kQueryBlock) {
          const QueryBlock block(first, std::min(kQueryBlock, seq - first), shape.window);
          cpu::RowMatrix<T> p = block_scores<T>(q, k, block, scale);
          add_position_bias(p, block, shape.window, shape.position_slope(h));
          for (std::int64_t i = 0; i < block.rows; ++i) {
            const std::int64_t begin = block.visible_begin(i, shape.window);
            const std::int64_t end = block.visible_end(i);
            auto row = p.row(i).segment(begin, end - begin);
            const T row_max = row.maxCoeff();
            row = (row.array() - row_max).exp().matrix();
            const T row_sum = row.sum();
            row /= row_sum;
            zero_invisible(p, i, begin, end);
            lse_row[first + i] = row_max + std::log(row_sum);
          }
          o.middleRows(first, block.rows).noalias() =
              p * v.middleRows(block.key_begin, block.keys());
        }
      }
    }
  });
}

void causal_attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                               const Tensor& lse, const AttentionShape& shape, Tensor& dqkv) {
  check_shapes("causal_attention_backward", qkv, shape, out, lse);
  check_same_numel("causal_attention_backward", qkv, dqkv);
  check_same_numel("causal_attention_backward", out, dout);
  if (on_cuda("causal_attention_backward", {&dout, &qkv, &out, &lse, &dqkv})) {
    const ScalarType type =
        check_cuda_types("causal_attention_backward", {&dout, &qkv, &out, &dqkv}, {&lse});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_causal_attention_backward(dout.raw(), qkv.raw(), out.raw(), lse.data<float>(),
                                             dqkv.raw(), cuda_dims(qkv, shape), type);
    }
    return;
  }
  check_cpu_same_type("causal_attention_backward", {&dout, &qkv, &out, &lse, &dqkv});
  const std::int64_t batch = qkv.size(0);
  const std::int64_t seq = qkv.size(1);
  const std::int64_t width = shape.qkv_width();
  const std::int64_t d = shape.head_dim;
  dispatch_floating(qkv.scalar_type(), "causal_attention_backward", [&]<class T>() {
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
    for (std::int64_t b = 0; b < batch; ++b) {
      const T* rows = qkv.data<T>() + b * seq * width;
      T* grad_rows = dqkv.data<T>() + b * seq * width;
      for (std::int64_t h = 0; h < shape.num_heads; ++h) {
        const Eigen::OuterStride<> row_stride(width);
        const cpu::ConstStridedMap<T> q(rows + shape.q_column(h), seq, d, row_stride);
        const cpu::ConstStridedMap<T> k(rows + shape.k_column(h), seq, d, row_stride);
        const cpu::ConstStridedMap<T> v(rows + shape.v_column(h), seq, d, row_stride);
        cpu::StridedMap<T> dq(grad_rows + shape.q_column(h), seq, d, row_stride);
        cpu::StridedMap<T> dk(grad_rows + shape.k_column(h), seq, d, row_stride);
        cpu::StridedMap<T> dv(grad_rows + shape.v_column(h), seq, d, row_stride);
        const Eigen::OuterStride<> out_stride(shape.output_width());
        const std::int64_t out_offset = b * seq * shape.output_width() + h * d;
        const cpu::ConstStridedMap<T> o(out.data<T>() + out_offset, seq, d, out_stride);
        const cpu::ConstStridedMap<T> d_o(dout.data<T>() + out_offset, seq, d, out_stride);
        const T* lse_row = lse.data<T>() + (b * shape.num_heads + h) * seq;
        // D_i = Σ_d dO·O: the softmax backward's row term, from the stored output.
        const cpu::RowMatrix<T> output_dot = (d_o.array() * o.array()).rowwise().sum();
        for (std::int64_t first = 0; first < seq; first += kQueryBlock) {
          const QueryBlock block(first, std::min(kQueryBlock, seq - first), shape.window);
          const std::int64_t count = block.rows;
          cpu::RowMatrix<T> p = block_scores<T>(q, k, block, scale);
          add_position_bias(p, block, shape.window, shape.position_slope(h));
          for (std::int64_t i = 0; i < count; ++i) {
            const std::int64_t begin = block.visible_begin(i, shape.window);
            const std::int64_t end = block.visible_end(i);
            p.row(i).segment(begin, end - begin) =
                (p.row(i).segment(begin, end - begin).array() - lse_row[first + i]).exp().matrix();
            zero_invisible(p, i, begin, end);
          }
          const auto keys = [&](auto& map) {
            return map.middleRows(block.key_begin, block.keys());
          };
          keys(dv).noalias() += p.transpose() * d_o.middleRows(first, count);
          cpu::RowMatrix<T> ds = d_o.middleRows(first, count) * keys(v).transpose();
          for (std::int64_t i = 0; i < count; ++i) {
            ds.row(i) =
                (p.row(i).array() * (ds.row(i).array() - output_dot(first + i, 0))).matrix();
          }
          dq.middleRows(first, count).noalias() += (ds * keys(k)) * scale;
          keys(dk).noalias() += (ds.transpose() * q.middleRows(first, count)) * scale;
        }
      }
    }
  });
}

}  // namespace strata::executor
