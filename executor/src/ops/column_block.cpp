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

}  // namespace

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
