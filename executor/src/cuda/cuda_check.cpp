#include "cuda_check.h"

#include <fmt/format.h>

#include "strata/executor/check.h"
#include "strata/executor/cuda/cuda_device.h"

namespace strata::executor::cuda {

void fail_cuda_call(cudaError_t error, const char* call, const char* file, int line) {
  throw DeviceError(fmt::format("CUDA call {} failed: {} ({}) at {}:{}", call,
                                cudaGetErrorString(error), cudaGetErrorName(error), file, line));
}

void fail_cublas_call(cublasStatus_t status, const char* call, const char* file, int line) {
  throw DeviceError(fmt::format("cuBLAS call {} failed: {} at {}:{}", call,
                                cublasLtGetStatusString(status), file, line));
}

void fail_unsupported(const char* op, const char* why) {
  throw InvariantError(fmt::format("{}: {}", op, why));
}

}  // namespace strata::executor::cuda
