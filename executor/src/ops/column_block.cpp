#include "strata/executor/ops/column_block.h"

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

// The block's column count, checked against x's rows.
std::int64_t block_columns(const char* op, const Tensor& x, std::int64_t width, std::int64_t first,
                           const Tensor& block) {
  STRATA_CHECK(width > 0 && x.numel() % width == 0, "{}: {} elements in rows of {}", op, x.numel(),
               width);
  const std::int64_t rows = x.numel() / width;
  STRATA_CHECK(rows > 0 && block.numel() % rows == 0, "{}: block of {} for {} rows", op,
               block.numel(), rows);
  const std::int64_t columns = block.numel() / rows;
  STRATA_CHECK(first >= 0 && first + columns <= width, "{}: columns [{}, {}) of {}", op, first,
               first + columns, width);
  return columns;
}

// The head columns' count per head, checked against x's rows.
std::int64_t head_columns(const char* op, const Tensor& x, std::int64_t width, std::int64_t first,
                          std::int64_t stride, std::int64_t heads, const Tensor& block) {
  STRATA_CHECK(heads > 0, "{}: {} heads", op, heads);
  const std::int64_t columns = block_columns(op, x, width, first, block);
  STRATA_CHECK(columns % heads == 0, "{}: {} columns for {} heads", op, columns, heads);
  const std::int64_t count = columns / heads;
  STRATA_CHECK(first + (heads - 1) * stride + count <= width && count <= stride,
               "{}: {} heads of {} columns {} apart from {} in rows of {}", op, heads, count,
               stride, first, width);
  return count;
}

}  // namespace

void copy_head_columns(const Tensor& x, std::int64_t width, std::int64_t first, std::int64_t stride,
                       std::int64_t heads, Tensor& block) {
  check_cpu_same_type("copy_head_columns", {&x, &block});
  const std::int64_t count =
      head_columns("copy_head_columns", x, width, first, stride, heads, block);
  dispatch_floating(x.scalar_type(), "copy_head_columns", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(x, width);
    auto out = cpu::as_matrix<T>(block, heads * count);
    for (std::int64_t h = 0; h < heads; ++h) {
      out.middleCols(h * count, count) = rows.middleCols(first + h * stride, count);
    }
  });
}

void write_head_columns(const Tensor& block, std::int64_t width, std::int64_t first,
                        std::int64_t stride, std::int64_t heads, Tensor& x) {
  check_cpu_same_type("write_head_columns", {&x, &block});
  const std::int64_t count =
      head_columns("write_head_columns", x, width, first, stride, heads, block);
  dispatch_floating(x.scalar_type(), "write_head_columns", [&]<class T>() {
    auto rows = cpu::as_matrix<T>(x, width);
    const auto in = cpu::as_matrix<T>(block, heads * count);
    for (std::int64_t h = 0; h < heads; ++h) {
      rows.middleCols(first + h * stride, count) = in.middleCols(h * count, count);
    }
  });
}

void copy_column_block(const Tensor& x, std::int64_t width, std::int64_t first, Tensor& block) {
  check_cpu_same_type("copy_column_block", {&x, &block});
  const std::int64_t columns = block_columns("copy_column_block", x, width, first, block);
  dispatch_floating(x.scalar_type(), "copy_column_block", [&]<class T>() {
    cpu::as_matrix<T>(block, columns) = cpu::as_matrix<T>(x, width).middleCols(first, columns);
  });
}

void write_column_block(const Tensor& block, std::int64_t width, std::int64_t first, Tensor& x) {
  check_cpu_same_type("write_column_block", {&x, &block});
  const std::int64_t columns = block_columns("write_column_block", x, width, first, block);
  dispatch_floating(x.scalar_type(), "write_column_block", [&]<class T>() {
    cpu::as_matrix<T>(x, width).middleCols(first, columns) = cpu::as_matrix<T>(block, columns);
  });
}

}  // namespace strata::executor
