#include "strata/executor/ops/attention_block.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

// Queries per piece of a block: bounds the score matrix held at once, as causal_attention does.
constexpr std::int64_t kQueryPiece = 64;

void check_block(const char* op, const Tensor& qkv, const Tensor& kv, const AttentionBlock& block,
                 const AttentionShape& shape) {
  STRATA_CHECK(qkv.dim() == 3 && qkv.size(2) == shape.qkv_width(), "{}: qkv {} for width {}", op,
               shape_to_string(qkv.shape()), shape.qkv_width());
  STRATA_CHECK(kv.dim() == 3 && kv.size(0) == qkv.size(0) && kv.size(2) == kv_width(shape),
               "{}: kv {} for qkv {}", op, shape_to_string(kv.shape()),
               shape_to_string(qkv.shape()));
  STRATA_CHECK(block.q_row >= 0 && block.rows >= 0 && block.q_row + block.rows <= qkv.size(1) &&
                   block.k_row >= 0 && block.k_row + block.rows <= kv.size(1),
               "{}: block of {} rows at q {} / k {} outside {} / {}", op, block.rows, block.q_row,
               block.k_row, qkv.size(1), kv.size(1));
}

// The keys [begin, end) of a block that its query `query` sees: all of them, or (diagonal)
// those up to its own position; under a sliding window only those less than `window` positions
// back. Empty (begin ≥ end) where the window ends before the block's keys start.
struct VisibleKeys {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  bool empty() const { return begin >= end; }
};
VisibleKeys visible_keys(const AttentionBlock& block, std::int64_t query, std::int64_t window) {
  VisibleKeys keys{0, block.mask == BlockMask::full ? block.rows : query + 1};
  if (window > 0) {
    // Key j is block.position_offset + query − j positions back.
    keys.begin = std::max<std::int64_t>(0, block.position_offset + query - window + 1);
  }
  return keys;
}

// ALiBi on a piece of a block's scores (queries first.., all its keys): −slope·distance, where
// the keys a query sees (visible_keys) are never after it.
template <class T>
void add_position_bias(cpu::RowMatrix<T>& scores, const AttentionBlock& block, std::int64_t first,
                       std::int64_t window, double slope) {
  if (slope == 0) return;
  for (std::int64_t i = 0; i < scores.rows(); ++i) {
    const std::int64_t query = first + i;
    const VisibleKeys keys = visible_keys(block, query, window);
    for (std::int64_t j = keys.begin; j < keys.end; ++j) {
      scores(i, j) -=
          static_cast<T>(slope * static_cast<double>(block.position_offset + query - j));
    }
  }
}

// Row i's scores outside its visible keys set to zero (neither garbage nor −∞: see
// causal_attention.cpp's block_scores on denormals).
template <class T>
void zero_invisible(cpu::RowMatrix<T>& p, std::int64_t i, const VisibleKeys& keys) {
  if (keys.empty()) {
    p.row(i).setZero();
    return;
  }
  p.row(i).head(keys.begin).setZero();
  p.row(i).tail(p.cols() - keys.end).setZero();
}

// The maps of one (batch row, query head) of a block.
template <class T, class QkvPointer, class KvPointer>
struct HeadViews {
  HeadViews(QkvPointer qkv, KvPointer kv, std::int64_t b, std::int64_t h, const Tensor& qkv_tensor,
            const Tensor& kv_tensor, const AttentionBlock& block, const AttentionShape& shape)
      : q(qkv + (b * qkv_tensor.size(1) + block.q_row) * shape.qkv_width() + shape.q_column(h),
          block.rows, shape.head_dim, Eigen::OuterStride<>(shape.qkv_width())),
        k(kv + (b * kv_tensor.size(1) + block.k_row) * kv_width(shape) +
              shape.kv_head_of(h) * shape.head_dim,
          block.rows, shape.head_dim, Eigen::OuterStride<>(kv_width(shape))),
        v(kv + (b * kv_tensor.size(1) + block.k_row) * kv_width(shape) +
              (shape.num_kv_heads + shape.kv_head_of(h)) * shape.head_dim,
          block.rows, shape.head_dim, Eigen::OuterStride<>(kv_width(shape))) {}
  using QMap = std::conditional_t<std::is_const_v<std::remove_pointer_t<QkvPointer>>,
                                  cpu::ConstStridedMap<T>, cpu::StridedMap<T>>;
  using KvMap = std::conditional_t<std::is_const_v<std::remove_pointer_t<KvPointer>>,
                                   cpu::ConstStridedMap<T>, cpu::StridedMap<T>>;
  QMap q;
  KvMap k, v;
};

}  // namespace

std::int64_t kv_width(const AttentionShape& shape) {
  return 2 * shape.num_kv_heads * shape.head_dim;
}

void extract_keys_values(const Tensor& qkv, const AttentionShape& shape, Tensor& kv) {
  check_cpu_same_type("extract_keys_values", {&qkv, &kv});
  const std::int64_t rows = qkv.numel() / shape.qkv_width();
  STRATA_CHECK(kv.numel() == rows * kv_width(shape), "extract_keys_values: kv {} for {} rows",
               shape_to_string(kv.shape()), rows);
  const std::int64_t first_key = shape.num_heads * shape.head_dim;
  dispatch_floating(qkv.scalar_type(), "extract_keys_values", [&]<class T>() {
    cpu::as_matrix<T>(kv, kv_width(shape)) =
        cpu::as_matrix<T>(qkv, shape.qkv_width()).middleCols(first_key, kv_width(shape));
  });
}

void add_keys_values_gradient(const Tensor& dkv, const AttentionShape& shape, Tensor& dqkv) {
  check_cpu_same_type("add_keys_values_gradient", {&dkv, &dqkv});
  const std::int64_t rows = dqkv.numel() / shape.qkv_width();
  STRATA_CHECK(dkv.numel() == rows * kv_width(shape),
               "add_keys_values_gradient: dkv {} for {} rows", shape_to_string(dkv.shape()), rows);
  const std::int64_t first_key = shape.num_heads * shape.head_dim;
  dispatch_floating(dqkv.scalar_type(), "add_keys_values_gradient", [&]<class T>() {
    cpu::as_matrix<T>(dqkv, shape.qkv_width()).middleCols(first_key, kv_width(shape)) +=
        cpu::as_matrix<T>(dkv, kv_width(shape));
  });
}

void attention_blocks_begin(Tensor& out, Tensor& lse) {
  check_cpu_same_type("attention_blocks_begin", {&out, &lse});
  dispatch_floating(out.scalar_type(), "attention_blocks_begin", [&]<class T>() {
    cpu::as_vector<T>(out).setZero();
    cpu::as_vector<T>(lse).setConstant(-std::numeric_limits<T>::infinity());
  });
}

void attention_block_forward(const Tensor& qkv, const Tensor& kv, const AttentionBlock& block,
                             const AttentionShape& shape, Tensor& out, Tensor& lse) {
  check_block("attention_block_forward", qkv, kv, block, shape);
  check_cpu_same_type("attention_block_forward", {&qkv, &kv, &out, &lse});
  const std::int64_t batch = qkv.size(0);
  const std::int64_t q_seq = qkv.size(1);
  const std::int64_t d = shape.head_dim;
  STRATA_CHECK(out.numel() == batch * q_seq * shape.output_width() &&
                   lse.numel() == batch * shape.num_heads * q_seq,
               "attention_block_forward: out {} lse {}", shape_to_string(out.shape()),
               shape_to_string(lse.shape()));
  dispatch_floating(qkv.scalar_type(), "attention_block_forward", [&]<class T>() {
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < shape.num_heads; ++h) {
        const HeadViews<T, const T*, const T*> views(qkv.data<T>(), kv.data<T>(), b, h, qkv, kv,
                                                     block, shape);
        cpu::StridedMap<T> o(
            out.data<T>() + (b * q_seq + block.q_row) * shape.output_width() + h * d, block.rows, d,
            Eigen::OuterStride<>(shape.output_width()));
        T* lse_row = lse.data<T>() + (b * shape.num_heads + h) * q_seq + block.q_row;
        for (std::int64_t first = 0; first < block.rows; first += kQueryPiece) {
          const std::int64_t count = std::min(kQueryPiece, block.rows - first);
          cpu::RowMatrix<T> p = (views.q.middleRows(first, count) * views.k.transpose()) * scale;
          add_position_bias(p, block, first, shape.window, shape.position_slope(h));
          cpu::RowMatrix<T> block_lse(count, 1);
          for (std::int64_t i = 0; i < count; ++i) {
            const VisibleKeys keys = visible_keys(block, first + i, shape.window);
            zero_invisible(p, i, keys);
            if (keys.empty()) continue;
            auto row = p.row(i).segment(keys.begin, keys.end - keys.begin);
            const T row_max = row.maxCoeff();
            row = (row.array() - row_max).exp().matrix();
            const T row_sum = row.sum();
            row /= row_sum;
            block_lse(i, 0) = row_max + std::log(row_sum);
          }
          const cpu::RowMatrix<T> block_out = p * views.v;
          for (std::int64_t i = 0; i < count; ++i) {
            // A query whose window ends before this block's keys takes nothing from it.
            if (visible_keys(block, first + i, shape.window).empty()) continue;
            // Online softmax: both parts reweighted to the merged normaliser.
            T& running = lse_row[first + i];
            const T merged_max = std::max(running, block_lse(i, 0));
            const T merged = merged_max + std::log(std::exp(running - merged_max) +
                                                   std::exp(block_lse(i, 0) - merged_max));
            o.row(first + i) = o.row(first + i) * std::exp(running - merged) +
                               block_out.row(i) * std::exp(block_lse(i, 0) - merged);
            running = merged;
          }
        }
      }
    }
  });
}

void attention_output_dot(const Tensor& dout, const Tensor& out, const AttentionShape& shape,
                          Tensor& output_dot) {
  check_cpu_same_type("attention_output_dot", {&dout, &out, &output_dot});
  check_same_numel("attention_output_dot", dout, out);
  const std::int64_t batch = out.size(0);
  const std::int64_t seq = out.size(1);
  const std::int64_t d = shape.head_dim;
  STRATA_CHECK(output_dot.numel() == batch * shape.num_heads * seq,
               "attention_output_dot: {} for out {}", shape_to_string(output_dot.shape()),
               shape_to_string(out.shape()));
  dispatch_floating(out.scalar_type(), "attention_output_dot", [&]<class T>() {
    const Eigen::OuterStride<> stride(shape.output_width());
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < shape.num_heads; ++h) {
        const std::int64_t offset = b * seq * shape.output_width() + h * d;
        const cpu::ConstStridedMap<T> o(out.data<T>() + offset, seq, d, stride);
        const cpu::ConstStridedMap<T> d_o(dout.data<T>() + offset, seq, d, stride);
        cpu::VectorMap<T>(output_dot.data<T>() + (b * shape.num_heads + h) * seq, seq) =
            (d_o.array() * o.array()).rowwise().sum().matrix().transpose();
      }
    }
  });
}

void attention_block_backward(const Tensor& dout, const Tensor& qkv, const Tensor& kv,
                              const Tensor& lse, const Tensor& output_dot,
                              const AttentionBlock& block, const AttentionShape& shape,
                              Tensor& dqkv, Tensor& dkv) {
  check_block("attention_block_backward", qkv, kv, block, shape);
  check_cpu_same_type("attention_block_backward",
                      {&dout, &qkv, &kv, &lse, &output_dot, &dqkv, &dkv});
  check_same_numel("attention_block_backward", qkv, dqkv);
  check_same_numel("attention_block_backward", kv, dkv);
  const std::int64_t batch = qkv.size(0);
  const std::int64_t q_seq = qkv.size(1);
  const std::int64_t d = shape.head_dim;
  dispatch_floating(qkv.scalar_type(), "attention_block_backward", [&]<class T>() {
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < shape.num_heads; ++h) {
        const HeadViews<T, const T*, const T*> views(qkv.data<T>(), kv.data<T>(), b, h, qkv, kv,
                                                     block, shape);
        HeadViews<T, T*, T*> grads(dqkv.data<T>(), dkv.data<T>(), b, h, qkv, kv, block, shape);
        const cpu::ConstStridedMap<T> d_o(
            dout.data<T>() + (b * q_seq + block.q_row) * shape.output_width() + h * d, block.rows,
            d, Eigen::OuterStride<>(shape.output_width()));
        const std::int64_t statistics = (b * shape.num_heads + h) * q_seq + block.q_row;
        const T* lse_row = lse.data<T>() + statistics;
        const T* dot_row = output_dot.data<T>() + statistics;
        for (std::int64_t first = 0; first < block.rows; first += kQueryPiece) {
          const std::int64_t count = std::min(kQueryPiece, block.rows - first);
          cpu::RowMatrix<T> p = (views.q.middleRows(first, count) * views.k.transpose()) * scale;
          add_position_bias(p, block, first, shape.window, shape.position_slope(h));
          for (std::int64_t i = 0; i < count; ++i) {
            const VisibleKeys keys = visible_keys(block, first + i, shape.window);
            zero_invisible(p, i, keys);
            if (keys.empty()) continue;
            auto row = p.row(i).segment(keys.begin, keys.end - keys.begin);
            row = (row.array() - lse_row[first + i]).exp().matrix();
          }
          grads.v.noalias() += p.transpose() * d_o.middleRows(first, count);
          cpu::RowMatrix<T> ds = d_o.middleRows(first, count) * views.v.transpose();
          for (std::int64_t i = 0; i < count; ++i) {
            ds.row(i) = (p.row(i).array() * (ds.row(i).array() - dot_row[first + i])).matrix();
          }
          grads.q.middleRows(first, count).noalias() += (ds * views.k) * scale;
          grads.k.noalias() += (ds.transpose() * views.q.middleRows(first, count)) * scale;
        }
      }
    }
  });
}

}  // namespace strata::executor
