#include "strata/executor/cuda/cuda_device.h"

#include <unistd.h>

#include <array>

#if STRATA_HAVE_CUDA
#include "cuda_check.h"
#include "cuda_context.h"
#include "device_allocator.h"
#endif

namespace strata::executor {

#if STRATA_HAVE_CUDA

std::optional<CudaDeviceInfo> cuda_device_info(std::string* why_not) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    if (why_not != nullptr) {
      *why_not = error != cudaSuccess ? cudaGetErrorString(error) : "no CUDA device is visible";
    }
    (void)cudaGetLastError();
    return std::nullopt;
  }
  int device = 0;
  STRATA_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  if (properties.major < 8) {
    if (why_not != nullptr) {
      *why_not = std::string(properties.name) +
                 " is older than compute capability 8.0 (bf16 tensor cores, cp.async)";
    }
    return std::nullopt;
  }
  return CudaDeviceInfo{properties.name, properties.major, properties.minor,
                        properties.multiProcessorCount, properties.totalGlobalMem};
}

DeviceMemoryStats cuda_memory_stats() { return cuda::device_allocator().stats(); }

std::optional<DeviceMemoryAvailable> cuda_memory_available() {
  if (!cuda_device_info()) return std::nullopt;
  DeviceMemoryAvailable available;
  STRATA_CUDA_CHECK(cudaMemGetInfo(&available.free_bytes, &available.total_bytes));
  return available;
}

void reset_cuda_peak_memory() { cuda::device_allocator().reset_peak(); }

void release_cached_cuda_memory() { cuda::device_allocator().release_cache(); }

void cuda_synchronize() { STRATA_CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream())); }

std::string cuda_device_identity() {
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  std::array<char, 64> bus{};
  STRATA_CUDA_CHECK(
      cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), cuda::cuda_context().device));
  return std::string(host.data()) + "/" + bus.data();
}

#else

std::optional<CudaDeviceInfo> cuda_device_info(std::string* why_not) {
  if (why_not != nullptr) {
    *why_not =
        "this build has no CUDA backend (the CUDA toolkit was not found when it was "
        "configured)";
  }
  return std::nullopt;
}

DeviceMemoryStats cuda_memory_stats() { return {}; }

std::optional<DeviceMemoryAvailable> cuda_memory_available() { return std::nullopt; }

void reset_cuda_peak_memory() {}

void release_cached_cuda_memory() {}

void cuda_synchronize() {}

std::string cuda_device_identity() {
  throw DeviceError("this build has no CUDA backend: no GPU to name");
}

#endif

}  // namespace strata::executor
