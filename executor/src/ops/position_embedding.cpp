#include "strata/executor/ops/position_embedding.h"

#include "cuda/position_embedding.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {

void position_embedding_forward(const Tensor& table, Tensor& x) {
  const std::int64_t seq = x.size(1);
  const std::int64_t hidden = x.size(2);
  STRATA_CHECK(seq <= table.size(0) && hidden == table.size(1),
               "position_embedding_forward: x {} table {}", shape_to_string(x.shape()),
               shape_to_string(table.shape()));
  if (on_cuda("position_embedding_forward", {&table, &x})) {
    const ScalarType type = check_cuda_types("position_embedding_forward", {&table, &x}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_position_embedding_forward(table.raw(), x.raw(), x.size(0), seq, hidden, type);
    }
    return;
  }
  check_cpu_same_type("position_embedding_forward", {&table, &x});
  dispatch_floating(x.scalar_type(), "position_embedding_forward", [&]<class T>() {
    const auto positions = cpu::as_matrix<T>(table, hidden).topRows(seq);
    for (std::int64_t b = 0; b < x.size(0); ++b) {
      cpu::MatrixMap<T>(x.data<T>() + b * seq * hidden, seq, hidden) += positions;
    }
  });
}

void position_embedding_backward(const Tensor& dx, Tensor& dtable) {
  const std::int64_t seq = dx.size(1);
  const std::int64_t hidden = dx.size(2);
  STRATA_CHECK(seq <= dtable.size(0) && hidden == dtable.size(1),
               "position_embedding_backward: dx {} dtable {}", shape_to_string(dx.shape()),
               shape_to_string(dtable.shape()));
  if (on_cuda("position_embedding_backward", {&dx, &dtable})) {
    const ScalarType type = check_cuda_types("position_embedding_backward", {&dx}, {&dtable});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_position_embedding_backward(dx.raw(), dtable.data<float>(), dx.size(0), seq,
                                               hidden, type);
    }
    return;
  }
  check_cpu_same_type("position_embedding_backward", {&dx, &dtable});
  dispatch_floating(dx.scalar_type(), "position_embedding_backward", [&]<class T>() {
    auto positions = cpu::as_matrix<T>(dtable, hidden).topRows(seq);
    for (std::int64_t b = 0; b < dx.size(0); ++b) {
      positions += cpu::ConstMatrixMap<T>(dx.data<T>() + b * seq * hidden, seq, hidden);
    }
  });
}

namespace {

void check_rows(const char* op, const Tensor& x, const Tensor& table, std::int64_t seq_length) {
  STRATA_CHECK(x.dim() == 2 && x.size(1) == table.size(1) && seq_length <= table.size(0),
               "{}: x {} table {} sequence {}", op, shape_to_string(x.shape()),
               shape_to_string(table.shape()), seq_length);
}

}  // namespace

void position_embedding_forward_rows(const Tensor& table, Tensor& x, std::int64_t seq_length,
                                     std::int64_t first_token) {
  check_rows("position_embedding_forward_rows", x, table, seq_length);
  const std::int64_t hidden = x.size(1);
  if (on_cuda("position_embedding_forward_rows", {&table, &x})) {
    const ScalarType type = check_cuda_types("position_embedding_forward_rows", {&table, &x}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_position_embedding_forward_rows(table.raw(), x.raw(), x.size(0), hidden,
                                                   seq_length, first_token, type);
    }
    return;
  }
  check_cpu_same_type("position_embedding_forward_rows", {&table, &x});
  dispatch_floating(x.scalar_type(), "position_embedding_forward_rows", [&]<class T>() {
    const auto positions = cpu::as_matrix<T>(table, hidden);
    auto rows = cpu::as_matrix<T>(x, hidden);
    for (std::int64_t i = 0; i < rows.rows(); ++i) {
      rows.row(i) += positions.row((first_token + i) % seq_length);
    }
  });
}

void position_embedding_backward_rows(const Tensor& dx, Tensor& dtable, std::int64_t seq_length,
                                      std::int64_t first_token) {
  check_rows("position_embedding_backward_rows", dx, dtable, seq_length);
  const std::int64_t hidden = dx.size(1);
  if (on_cuda("position_embedding_backward_rows", {&dx, &dtable})) {
    const ScalarType type = check_cuda_types("position_embedding_backward_rows", {&dx}, {&dtable});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_position_embedding_backward_rows(dx.raw(), dtable.data<float>(), dx.size(0),
                                                    hidden, seq_length, first_token, type);
    }
    return;
  }
  check_cpu_same_type("position_embedding_backward_rows", {&dx, &dtable});
  dispatch_floating(dx.scalar_type(), "position_embedding_backward_rows", [&]<class T>() {
    auto positions = cpu::as_matrix<T>(dtable, hidden);
    const auto rows = cpu::as_matrix<T>(dx, hidden);
    for (std::int64_t i = 0; i < rows.rows(); ++i) {
      positions.row((first_token + i) % seq_length) += rows.row(i);
    }
  });
}

}  // namespace strata::executor
