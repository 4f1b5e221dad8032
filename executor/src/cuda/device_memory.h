// Device memory for Tensor: allocation from the caching allocator, zero-fill and copies on the
// backend's stream. Declarations only, in plain types, so that tensor.cpp includes them in every
// build and calls them under `if constexpr (kCudaBackendBuilt)`; defined in device_memory.cpp,
// which only CUDA builds compile.
#pragma once

#include <cstddef>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

// `bytes` (> 0) of device memory; throws DeviceError when the device has none left.
void* device_allocate(std::size_t bytes);
// Gives the block back to the allocator's cache; work already queued on the stream may still
// use it, and the next user of the block queues after that work.
void device_release(void* pointer);
void device_fill_zero(void* pointer, std::size_t bytes);
// Any direction; returns once `destination` holds the bytes when it is host memory.
void device_copy(void* destination, Device destination_device, const void* source,
                 Device source_device, std::size_t bytes);

}  // namespace strata::executor::cuda
