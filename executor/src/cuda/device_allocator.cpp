#include "device_allocator.h"

#include <fmt/format.h>

#include "cuda_check.h"

namespace strata::executor::cuda {
namespace {

constexpr std::size_t kSmallLimit = std::size_t{1} << 20;
constexpr std::size_t kSmallGranule = 512;
constexpr std::size_t kLargeGranule = std::size_t{2} << 20;

double gib(std::size_t bytes) { return static_cast<double>(bytes) / (1u << 30); }

}  // namespace

std::size_t DeviceAllocator::size_class(std::size_t bytes) {
  const std::size_t granule = bytes <= kSmallLimit ? kSmallGranule : kLargeGranule;
  return (bytes + granule - 1) / granule * granule;
}

void* DeviceAllocator::allocate(std::size_t bytes) {
  const std::size_t size = size_class(bytes);
  std::lock_guard lock(mutex_);
  void* pointer = nullptr;
  auto cached = free_blocks_.find(size);
  if (cached != free_blocks_.end() && !cached->second.empty()) {
    pointer = cached->second.back();
    cached->second.pop_back();
  } else {
    cudaError_t error = cudaMalloc(&pointer, size);
    if (error == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the sticky-free error state of the failed call
      return_cache_to_driver();
      error = cudaMalloc(&pointer, size);
    }
    if (error == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      std::size_t free_bytes = 0, total_bytes = 0;
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      throw DeviceError(fmt::format(
          "CUDA out of memory: {:.2f} GiB asked for while tensors hold {:.2f} GiB; the device "
          "has {:.2f} GiB free of {:.2f} GiB (a smaller micro-batch or model needs less)",
          gib(size), gib(stats_.allocated_bytes), gib(free_bytes), gib(total_bytes)));
    }
    STRATA_CUDA_CHECK(error);
    stats_.reserved_bytes += size;
  }
  live_blocks_.emplace(pointer, size);
  stats_.allocated_bytes += size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return pointer;
}

void DeviceAllocator::release(void* pointer) {
  std::lock_guard lock(mutex_);
  const auto live = live_blocks_.find(pointer);
  if (live == live_blocks_.end()) return;  // not ours: a bug, but freeing must not throw
  stats_.allocated_bytes -= live->second;
  free_blocks_[live->second].push_back(pointer);
  live_blocks_.erase(live);
}

void DeviceAllocator::return_cache_to_driver() {
  // Blocks may still be read by queued kernels: wait for them before the driver reuses the memory.
  STRATA_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto& [size, blocks] : free_blocks_) {
    for (void* block : blocks) {
      STRATA_CUDA_CHECK(cudaFree(block));
      stats_.reserved_bytes -= size;
    }
    blocks.clear();
  }
}

DeviceMemoryStats DeviceAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void DeviceAllocator::release_cache() {
  std::lock_guard lock(mutex_);
  return_cache_to_driver();
}

void DeviceAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

DeviceAllocator& device_allocator() {
  // Never destroyed: tensors in static storage may release blocks after main returns, when the
  // CUDA runtime is already shutting down.
  static DeviceAllocator* allocator = new DeviceAllocator();
  return *allocator;
}

}  // namespace strata::executor::cuda
