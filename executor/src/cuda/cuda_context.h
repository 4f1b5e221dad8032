// CudaContext: the backend's per-process state — the device, the one stream every op runs on,
// the cuBLASLt handle and its workspace. Made on first use. Used by every CUDA op and by
// device_memory.cpp.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace strata::executor::cuda {

struct CudaContext {
  int device = 0;
  int streaming_multiprocessors = 0;
  std::size_t shared_memory_per_block_optin = 0;
  // Non-blocking: work on the legacy default stream (libraries, other code) never orders ours.
  cudaStream_t stream = nullptr;
  cublasLtHandle_t blas = nullptr;
  void* blas_workspace = nullptr;
  std::size_t blas_workspace_bytes = 0;
};

// The context, made on the first call; throws DeviceError when no GPU can be used.
CudaContext& cuda_context();
inline cudaStream_t current_stream() { return cuda_context().stream; }

}  // namespace strata::executor::cuda
