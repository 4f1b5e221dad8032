// Tensor: a shape, a scalar type, a device and storage that is either owned (shared between views)
// or borrowed. No autograd: every layer writes its backward explicitly, as llm.c and Megatron do.
// Used by every op, the model, the optimizer and checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/executor/check.h"

namespace strata::executor {

// float64 exists for the finite-difference tests of every op; training on the CPU is float32.
// bf16/fp16 join with the CUDA backend, behind the same op signatures.
enum class ScalarType { float32, float64, int32 };
// Where storage lives. The CUDA backend adds Device::cuda; ops dispatch on it.
enum class Device { cpu };

std::size_t scalar_bytes(ScalarType type);
const char* scalar_type_name(ScalarType type);

template <class T>
constexpr ScalarType scalar_type_of();
template <>
constexpr ScalarType scalar_type_of<float>() {
  return ScalarType::float32;
}
template <>
constexpr ScalarType scalar_type_of<double>() {
  return ScalarType::float64;
}
template <>
constexpr ScalarType scalar_type_of<std::int32_t>() {
  return ScalarType::int32;
}

using Shape = std::vector<std::int64_t>;
std::string shape_to_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Owned, zero-filled storage.
  static Tensor zeros(Shape shape, ScalarType type, Device device = Device::cpu);
  // Storage owned by someone else, who keeps it alive longer than the tensor.
  static Tensor borrow(void* data, Shape shape, ScalarType type, Device device = Device::cpu);

  const Shape& shape() const { return shape_; }
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t size(std::int64_t axis) const;  // negative counts from the end
  std::int64_t numel() const { return numel_; }
  std::size_t bytes() const { return static_cast<std::size_t>(numel_) * scalar_bytes(type_); }
  ScalarType scalar_type() const { return type_; }
  Device device() const { return device_; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <class T>
  T* data() {
    check_type(scalar_type_of<T>());
    return static_cast<T*>(data_);
  }
  template <class T>
  const T* data() const {
    check_type(scalar_type_of<T>());
    return static_cast<const T*>(data_);
  }

  // The same storage seen with another shape of the same element count.
  Tensor reshaped(Shape shape) const;
  // Elements [offset, offset + numel(shape)) of this tensor's storage as a tensor of `shape`
  // (how parameters are views into one flat buffer).
  Tensor view(std::int64_t offset, Shape shape) const;
  void fill_zero();
  void copy_from(const Tensor& source);  // same scalar type and element count

 private:
  void check_type(ScalarType wanted) const;

  Shape shape_;
  std::int64_t numel_ = 0;
  ScalarType type_ = ScalarType::float32;
  Device device_ = Device::cpu;
  std::shared_ptr<std::byte[]> owner_;  // null when borrowed
  void* data_ = nullptr;
};

std::int64_t shape_numel(const Shape& shape);

}  // namespace strata::executor
