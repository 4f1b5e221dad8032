// STRATA_CUDA_CHECK / STRATA_CUBLAS_CHECK: every CUDA runtime and cuBLAS call of the backend goes
// through one of them (llm.c's cudaCheck), and every kernel launch is followed by
// STRATA_CUDA_CHECK_LAUNCH(). A failure throws DeviceError naming the call, the error, the file
// and the line. Used by the CUDA backend's .cu and .cpp files only.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace strata::executor::cuda {

[[noreturn]] void fail_cuda_call(cudaError_t error, const char* call, const char* file, int line);
[[noreturn]] void fail_cublas_call(cublasStatus_t status, const char* call, const char* file,
                                   int line);
// A launcher asked for something its kernels do not do (a dtype, a head dimension): a bug in the
// host-side checks before it. Throws InvariantError.
[[noreturn]] void fail_unsupported(const char* op, const char* why);

}  // namespace strata::executor::cuda

#define STRATA_CUDA_CHECK(call)                                                                \
  do {                                                                                         \
    const cudaError_t strata_cuda_error_ = (call);                                             \
    if (strata_cuda_error_ != cudaSuccess) {                                                   \
      ::strata::executor::cuda::fail_cuda_call(strata_cuda_error_, #call, __FILE__, __LINE__); \
    }                                                                                          \
  } while (false)

#define STRATA_CUBLAS_CHECK(call)                                                        \
  do {                                                                                   \
    const cublasStatus_t strata_cublas_status_ = (call);                                 \
    if (strata_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                \
      ::strata::executor::cuda::fail_cublas_call(strata_cublas_status_, #call, __FILE__, \
                                                 __LINE__);                              \
    }                                                                                    \
  } while (false)

// After a kernel launch: a bad configuration (too many threads, too much shared memory) shows up
// here, at the launch, instead of as a wrong result later.
#define STRATA_CUDA_CHECK_LAUNCH() STRATA_CUDA_CHECK(cudaGetLastError())
