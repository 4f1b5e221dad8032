// DeviceAllocator: a caching allocator of device memory (as PyTorch's and llm.c's), so that the
// training loop never calls cudaMalloc or cudaFree once its shapes have been seen. Used by
// device_memory.cpp for every CUDA tensor.
//
// Blocks are rounded up to a size class (512 B below 1 MiB, 2 MiB above) and a released block
// waits in its class's free list for the next request of that class. Everything runs on one
// stream, so a block released while queued kernels still read it is safe to hand out again: its
// next user queues behind them. When the driver has no memory left, the cache is returned to it
// and the request tried once more before it fails.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "strata/executor/cuda/cuda_device.h"

namespace strata::executor::cuda {

class DeviceAllocator {
 public:
  DeviceAllocator() = default;
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  void* allocate(std::size_t bytes);
  void release(void* pointer);
  DeviceMemoryStats stats() const;
  void reset_peak();
  // Returns every cached free block to the driver.
  void release_cache();

  static std::size_t size_class(std::size_t bytes);

 private:
  void return_cache_to_driver();  // caller holds mutex_

  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_blocks_;  // size class → cached blocks
  std::unordered_map<void*, std::size_t> live_blocks_;     // pointer → size class
  DeviceMemoryStats stats_;
};

DeviceAllocator& device_allocator();

}  // namespace strata::executor::cuda
