// Eigen views of tensor storage for the CPU ops: row-major, as tensors are laid out.
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor::cpu {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;
template <class T>
using ConstMatrixMap = Eigen::Map<const RowMatrix<T>>;
// Rows of a wider row-major layout: a matrix whose consecutive rows lie `stride` elements apart
// (one head's columns of a fused projection).
template <class T>
using StridedMap = Eigen::Map<RowMatrix<T>, 0, Eigen::OuterStride<>>;
template <class T>
using ConstStridedMap = Eigen::Map<const RowMatrix<T>, 0, Eigen::OuterStride<>>;
template <class T>
using RowVector = Eigen::Matrix<T, 1, Eigen::Dynamic>;
template <class T>
using VectorMap = Eigen::Map<RowVector<T>>;
template <class T>
using ConstVectorMap = Eigen::Map<const RowVector<T>>;

// A tensor seen as [numel / columns, columns].
template <class T>
MatrixMap<T> as_matrix(Tensor& tensor, std::int64_t columns) {
  return MatrixMap<T>(tensor.data<T>(), tensor.numel() / columns, columns);
}
template <class T>
ConstMatrixMap<T> as_matrix(const Tensor& tensor, std::int64_t columns) {
  return ConstMatrixMap<T>(tensor.data<T>(), tensor.numel() / columns, columns);
}
template <class T>
VectorMap<T> as_vector(Tensor& tensor) {
  return VectorMap<T>(tensor.data<T>(), tensor.numel());
}
template <class T>
ConstVectorMap<T> as_vector(const Tensor& tensor) {
  return ConstVectorMap<T>(tensor.data<T>(), tensor.numel());
}

}  // namespace strata::executor::cpu
