#include "strata/executor/tensor/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/mman.h>

#include <cstring>
#include <new>

#include "../cuda/device_memory.h"
#include "strata/executor/cuda/cuda_device.h"

namespace strata::executor {
namespace {

void check_device_built(Device device) {
  if (device == Device::cuda && !kCudaBackendBuilt) {
    throw DeviceError(
        "a CUDA tensor was asked for, but this build has no CUDA backend (the "
        "CUDA toolkit was not found when it was configured)");
  }
}

// Zero-filled host memory, 64-byte aligned (Eigen's vectorised loads). Large buffers — a model's
// gradients and Adam moments, GBs for GPT-2 124M — are mapped from the kernel's zero pages
// instead of written with zeros: nothing is touched until the first step writes it, which took
// start-up seconds of memset and page faults, and transparent huge pages cut the faults 512-fold.
// Under AddressSanitizer everything comes from operator new, which it instruments.
std::shared_ptr<std::byte[]> allocate_zeroed_host(std::size_t bytes) {
#if !defined(__SANITIZE_ADDRESS__)
  constexpr std::size_t kMappedFrom = std::size_t{1} << 20;
  if (bytes >= kMappedFrom) {
    void* mapped =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    ::madvise(mapped, bytes, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores it
    return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(mapped),
                                        [bytes](std::byte* pointer) { ::munmap(pointer, bytes); });
  }
#endif
  return std::shared_ptr<std::byte[]>(
      new (std::align_val_t{64}) std::byte[bytes > 0 ? bytes : 1](),
      [](std::byte* pointer) { ::operator delete[](pointer, std::align_val_t{64}); });
}

}  // namespace

std::string shape_to_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t count = 1;
  for (std::int64_t extent : shape) {
    STRATA_CHECK(extent >= 0, "negative extent in shape {}", shape_to_string(shape));
    count *= extent;
  }
  return count;
}

Tensor Tensor::zeros(Shape shape, ScalarType type, Device device) {
  Tensor tensor;
  tensor.numel_ = shape_numel(shape);
  tensor.shape_ = std::move(shape);
  tensor.type_ = type;
  tensor.device_ = device;
  const std::size_t bytes = tensor.bytes();
  check_device_built(device);
  if (device == Device::cuda) {
    if constexpr (kCudaBackendBuilt) {
      tensor.owner_ = std::shared_ptr<std::byte[]>(
          static_cast<std::byte*>(cuda::device_allocate(bytes > 0 ? bytes : 1)),
          [](std::byte* pointer) { cuda::device_release(pointer); });
      tensor.data_ = tensor.owner_.get();
      if (bytes > 0) cuda::device_fill_zero(tensor.data_, bytes);
    }
    return tensor;
  }
  tensor.owner_ = allocate_zeroed_host(bytes);
  tensor.data_ = tensor.owner_.get();
  return tensor;
}

Tensor Tensor::zeros_like(const Tensor& other) {
  return zeros(other.shape_, other.type_, other.device_);
}

Tensor Tensor::borrow(void* data, Shape shape, ScalarType type, Device device) {
  Tensor tensor;
  tensor.numel_ = shape_numel(shape);
  tensor.shape_ = std::move(shape);
  tensor.type_ = type;
  tensor.device_ = device;
  tensor.data_ = data;
  return tensor;
}

std::int64_t Tensor::size(std::int64_t axis) const {
  const std::int64_t rank = dim();
  const std::int64_t index = axis < 0 ? axis + rank : axis;
  STRATA_CHECK(index >= 0 && index < rank, "axis {} out of range for shape {}", axis,
               shape_to_string(shape_));
  return shape_[static_cast<std::size_t>(index)];
}

Tensor Tensor::reshaped(Shape shape) const { return view(0, std::move(shape)); }

Tensor Tensor::view(std::int64_t offset, Shape shape) const {
  const std::int64_t count = shape_numel(shape);
  STRATA_CHECK(offset >= 0 && offset + count <= numel_, "view of {} elements at {} outside {}",
               count, offset, shape_to_string(shape_));
  Tensor result = *this;
  result.shape_ = std::move(shape);
  result.numel_ = count;
  result.data_ =
      static_cast<std::byte*>(data_) + static_cast<std::size_t>(offset) * scalar_bytes(type_);
  return result;
}

void Tensor::fill_zero() {
  if (numel_ == 0) return;
  if (device_ == Device::cuda) {
    if constexpr (kCudaBackendBuilt) cuda::device_fill_zero(data_, bytes());
    return;
  }
  std::memset(data_, 0, bytes());
}

void Tensor::copy_from(const Tensor& source) {
  STRATA_CHECK(source.type_ == type_ && source.numel_ == numel_, "copy of {} {} into {} {}",
               scalar_type_name(source.type_), shape_to_string(source.shape_),
               scalar_type_name(type_), shape_to_string(shape_));
  if (numel_ == 0) return;
  if (device_ == Device::cuda || source.device_ == Device::cuda) {
    if constexpr (kCudaBackendBuilt) {
      cuda::device_copy(data_, device_, source.data_, source.device_, bytes());
    }
    return;
  }
  std::memcpy(data_, source.data_, bytes());
}

Tensor Tensor::to(Device device) const {
  Tensor result = zeros(shape_, type_, device);
  result.copy_from(*this);
  return result;
}

void Tensor::check_type(ScalarType wanted) const {
  STRATA_CHECK(type_ == wanted, "tensor {} holds {}, read as {}", shape_to_string(shape_),
               scalar_type_name(type_), scalar_type_name(wanted));
}

}  // namespace strata::executor
