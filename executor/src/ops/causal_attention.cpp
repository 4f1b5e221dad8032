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

// Scaled scores of queries [first, first + rows) against keys [0, first + rows). Entries above
// the diagonal are garbage here: callers use only the first first + i + 1 columns of row i and
// zero the rest. (Writing −∞ there and exponentiating would leave Eigen's clamped exp(−88) ≈
// FLT_MIN, which turns denormal after normalisation and slows every later GEMM 25×.)
template <class T>
cpu::RowMatrix<T> block_scores(const cpu::ConstStridedMap<T>& q, const cpu::ConstStridedMap<T>& k,
                               std::int64_t first, std::int64_t rows, T scale) {
  const std::int64_t keys = first + rows;
  return (q.middleRows(first, rows) * k.topRows(keys).transpose()) * scale;
}

// ALiBi: score(first + i, j) −= slope·(first + i − j) on the visible keys of each row.
template <class T>
void add_position_bias(cpu::RowMatrix<T>& scores, std::int64_t first, double slope) {
  if (slope == 0) return;
  for (std::int64_t i = 0; i < scores.rows(); ++i) {
    for (std::int64_t j = 0; j <= first + i; ++j) {
      scores(i, j) -= static_cast<T>(slope * static_cast<double>(first + i - j));
    }
  }
}

cuda::AttentionDims cuda_dims(const Tensor& qkv, const AttentionShape& shape) {
  STRATA_CHECK(shape.alibi_heads == 0, "causal attention on CUDA takes no ALiBi bias");
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
          const std::int64_t count = std::min(kQueryBlock, seq - first);
          cpu::RowMatrix<T> p = block_scores<T>(q, k, first, count, scale);
          add_position_bias(p, first, shape.position_slope(h));
          for (std::int64_t i = 0; i < count; ++i) {
            const std::int64_t visible = first + i + 1;
            auto row = p.row(i).head(visible);
            const T row_max = row.maxCoeff();
            row = (row.array() - row_max).exp().matrix();
            const T row_sum = row.sum();
            row /= row_sum;
            p.row(i).tail(p.cols() - visible).setZero();
            lse_row[first + i] = row_max + std::log(row_sum);
          }
          o.middleRows(first, count).noalias() = p * v.topRows(first + count);
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
          const std::int64_t count = std::min(kQueryBlock, seq - first);
          const std::int64_t keys = first + count;
          cpu::RowMatrix<T> p = block_scores<T>(q, k, first, count, scale);
          add_position_bias(p, first, shape.position_slope(h));
          for (std::int64_t i = 0; i < count; ++i) {
            const std::int64_t visible = first + i + 1;
            p.row(i).head(visible) =
                (p.row(i).head(visible).array() - lse_row[first + i]).exp().matrix();
            p.row(i).tail(p.cols() - visible).setZero();
          }
          dv.topRows(keys).noalias() += p.transpose() * d_o.middleRows(first, count);
          cpu::RowMatrix<T> ds = d_o.middleRows(first, count) * v.topRows(keys).transpose();
          for (std::int64_t i = 0; i < count; ++i) {
            ds.row(i) =
                (p.row(i).array() * (ds.row(i).array() - output_dot(first + i, 0))).matrix();
          }
          dq.middleRows(first, count).noalias() += (ds * k.topRows(keys)) * scale;
          dk.topRows(keys).noalias() += (ds.transpose() * q.middleRows(first, count)) * scale;
        }
      }
    }
  });
}

}  // namespace strata::executor
