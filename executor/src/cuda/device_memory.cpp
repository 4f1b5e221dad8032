#include "device_memory.h"

#include "cuda_check.h"
#include "cuda_context.h"
#include "device_allocator.h"

namespace strata::executor::cuda {

void* device_allocate(std::size_t bytes) {
  cuda_context();  // the device is chosen (and checked) before its first allocation
  return device_allocator().allocate(bytes);
}

void device_release(void* pointer) { device_allocator().release(pointer); }

void device_fill_zero(void* pointer, std::size_t bytes) {
  STRATA_CUDA_CHECK(cudaMemsetAsync(pointer, 0, bytes, current_stream()));
}

void device_copy(void* destination, Device destination_device, const void* source,
                 Device source_device, std::size_t bytes) {
  const cudaStream_t stream = current_stream();
  const cudaMemcpyKind kind =
      source_device == Device::cuda
          ? (destination_device == Device::cuda ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
          : (destination_device == Device::cuda ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  STRATA_CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, kind, stream));
  // A pageable host source is staged before cudaMemcpyAsync returns; a host destination is
  // complete only when the stream has reached the copy.
  if (destination_device == Device::cpu) STRATA_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace strata::executor::cuda
