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
#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor {

// A bfloat16 element as host code sees it: the upper 16 bits of a float32 (tensor/bfloat16.h
// converts). CUDA kernels read the same bits as __nv_bfloat16.
struct BFloat16 {
  std::uint16_t bits = 0;
};

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
template <>
constexpr ScalarType scalar_type_of<BFloat16>() {
  return ScalarType::bfloat16;
}

using Shape = std::vector<std::int64_t>;
std::string shape_to_string(const Shape& shape);

// Storage is host memory or, on Device::cuda, memory of the current GPU from the CUDA backend's
// caching allocator; data<T>() then gives a device pointer, for kernels only. Operations that
// touch elements (fill_zero, copy_from, to) run on the backend's one stream, in order with the
// ops, and a copy to the host waits for the work before it.
class Tensor {
 public:
  Tensor() = default;
  // Owned, zero-filled storage.
  static Tensor zeros(Shape shape, ScalarType type, Device device = Device::cpu);
  // Zeros with other's shape, type and device.
  static Tensor zeros_like(const Tensor& other);
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
  // Same scalar type and element count; any pair of devices.
  void copy_from(const Tensor& source);
  // A new tensor with this one's shape, type and elements on `device`.
  Tensor to(Device device) const;

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
