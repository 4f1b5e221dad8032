// The CUDA backend seen from host code: whether this build has it, the device it runs on, its
// memory statistics and the one error type for device failures. Used by the ops' dispatch, the
// trainer, `strata train --device cuda`, the GPU tests (to skip without a GPU) and the benches.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

#ifndef STRATA_HAVE_CUDA
#define STRATA_HAVE_CUDA 0
#endif

namespace strata::executor {

// True when CMake found the CUDA toolkit and built the backend (STRATA_CUDA=AUTO/ON). Ops branch
// on it with `if constexpr`, so a CPU-only build never references a CUDA symbol.
inline constexpr bool kCudaBackendBuilt = STRATA_HAVE_CUDA != 0;

// A device that cannot do what was asked: no GPU, out of memory, a failing CUDA or cuBLAS call.
// The message says what was asked and why it failed, in one line.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CudaDeviceInfo {
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int streaming_multiprocessors = 0;
  std::size_t memory_bytes = 0;
};

// The device the backend uses (the first visible one), or nothing with the reason in
// `why_not`: a build without CUDA, no driver, or no GPU.
std::optional<CudaDeviceInfo> cuda_device_info(std::string* why_not = nullptr);

struct DeviceMemoryStats {
  std::size_t allocated_bytes = 0;       // held by live tensors now
  std::size_t peak_allocated_bytes = 0;  // the most held at once since the last reset
  std::size_t reserved_bytes = 0;        // taken from the driver (live + cached for reuse)
};
DeviceMemoryStats cuda_memory_stats();

// What the driver can still give this process now (cudaMemGetInfo: other processes' and this
// context's memory already taken out), or nothing without a usable GPU.
struct DeviceMemoryAvailable {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};
std::optional<DeviceMemoryAvailable> cuda_memory_available();
void reset_cuda_peak_memory();
// Gives the allocator's cached free blocks back to the driver (for another process's turn).
void release_cached_cuda_memory();

// Waits until every op queued on the backend's stream has finished (for timing).
void cuda_synchronize();

// The GPU this process runs on, as "host/PCI bus id": equal for two ranks exactly when they
// share a GPU. Throws DeviceError in a build without CUDA.
std::string cuda_device_identity();

}  // namespace strata::executor
