#include "strata/executor/ops/attention_sinks.h"

#include <algorithm>
#include <cmath>

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

void check_shapes(const char* op, const Tensor& sinks, const AttentionShape& shape,
                  const Tensor& out, const Tensor& lse) {
  STRATA_CHECK(sinks.numel() == shape.num_heads, "{}: {} sinks for {} heads", op, sinks.numel(),
               shape.num_heads);
  STRATA_CHECK(out.dim() == 3 && out.size(2) == shape.output_width() &&
                   lse.numel() == out.size(0) * out.size(1) * shape.num_heads,
               "{}: out {} lse {}", op, shape_to_string(out.shape()), shape_to_string(lse.shape()));
}

}  // namespace

void attention_sinks_forward(const Tensor& sinks, const AttentionShape& shape, Tensor& out,
                             Tensor& lse) {
  check_shapes("attention_sinks_forward", sinks, shape, out, lse);
  check_cpu_same_type("attention_sinks_forward", {&sinks, &out, &lse});
  const std::int64_t batch = out.size(0);
  const std::int64_t seq = out.size(1);
  const std::int64_t d = shape.head_dim;
  dispatch_floating(out.scalar_type(), "attention_sinks_forward", [&]<class T>() {
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < shape.num_heads; ++h) {
        const T sink = sinks.data<T>()[h];
        T* lse_row = lse.data<T>() + (b * shape.num_heads + h) * seq;
        cpu::StridedMap<T> o(out.data<T>() + b * seq * shape.output_width() + h * d, seq, d,
                             Eigen::OuterStride<>(shape.output_width()));
        for (std::int64_t i = 0; i < seq; ++i) {
          const T top = std::max(lse_row[i], sink);
          const T merged = top + std::log(std::exp(lse_row[i] - top) + std::exp(sink - top));
          o.row(i) *= std::exp(lse_row[i] - merged);
          lse_row[i] = merged;
        }
      }
    }
  });
}

void attention_sinks_backward(const Tensor& dout, const Tensor& out, const Tensor& lse,
                              const Tensor& sinks, const AttentionShape& shape, Tensor& dsinks) {
  check_shapes("attention_sinks_backward", sinks, shape, out, lse);
  check_same_numel("attention_sinks_backward", out, dout);
  check_same_numel("attention_sinks_backward", sinks, dsinks);
  check_cpu_same_type("attention_sinks_backward", {&dout, &out, &lse, &sinks, &dsinks});
  const std::int64_t batch = out.size(0);
  const std::int64_t seq = out.size(1);
  const std::int64_t d = shape.head_dim;
  dispatch_floating(out.scalar_type(), "attention_sinks_backward", [&]<class T>() {
    const Eigen::OuterStride<> stride(shape.output_width());
    for (std::int64_t h = 0; h < shape.num_heads; ++h) {
      const T sink = sinks.data<T>()[h];
      double gradient = 0;  // summed over every query of the micro-batch
      for (std::int64_t b = 0; b < batch; ++b) {
        const std::int64_t offset = b * seq * shape.output_width() + h * d;
        const cpu::ConstStridedMap<T> o(out.data<T>() + offset, seq, d, stride);
        const cpu::ConstStridedMap<T> d_o(dout.data<T>() + offset, seq, d, stride);
        const T* lse_row = lse.data<T>() + (b * shape.num_heads + h) * seq;
        for (std::int64_t i = 0; i < seq; ++i) {
          const T sink_probability = std::exp(sink - lse_row[i]);
          gradient -= static_cast<double>(sink_probability * d_o.row(i).dot(o.row(i)));
        }
      }
      dsinks.data<T>()[h] += static_cast<T>(gradient);
    }
  });
}

}  // namespace strata::executor
