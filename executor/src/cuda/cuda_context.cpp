#include "cuda_context.h"

#include <fmt/format.h>

#include <cstdlib>

#include "cuda_check.h"
#include "device_allocator.h"
#include "strata/executor/cuda/cuda_device.h"

namespace strata::executor::cuda {
namespace {

// cuBLASLt's recommendation for Hopper (32 MiB) covers the split-K and stream-K kernels.
constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;

// Ranks of one machine take its GPUs in turn (local rank modulo the count): mpirun -np 8 on
// eight GPUs gives each rank its own, and ranks beyond the count share one, as two ranks on a
// single GPU do.
void select_device_of_local_rank() {
  const char* local_rank = nullptr;
  for (const char* variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    if ((local_rank = std::getenv(variable)) != nullptr) break;
  }
  int count = 0;
  if (local_rank == nullptr || cudaGetDeviceCount(&count) != cudaSuccess || count <= 1) {
    (void)cudaGetLastError();
    return;
  }
  STRATA_CUDA_CHECK(cudaSetDevice(std::atoi(local_rank) % count));
}

CudaContext make_context() {
  select_device_of_local_rank();
  std::string why_not;
  if (!cuda_device_info(&why_not)) throw DeviceError("no CUDA device to run on: " + why_not);
  CudaContext context;
  STRATA_CUDA_CHECK(cudaGetDevice(&context.device));
  cudaDeviceProp properties{};
  STRATA_CUDA_CHECK(cudaGetDeviceProperties(&properties, context.device));
  context.streaming_multiprocessors = properties.multiProcessorCount;
  context.shared_memory_per_block_optin = properties.sharedMemPerBlockOptin;
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(&context.stream, cudaStreamNonBlocking));
  STRATA_CUBLAS_CHECK(cublasLtCreate(&context.blas));
  context.blas_workspace_bytes = kBlasWorkspaceBytes;
  context.blas_workspace = device_allocator().allocate(kBlasWorkspaceBytes);
  return context;
}

}  // namespace

CudaContext& cuda_context() {
  // Never destroyed, like the allocator: static tensors may outlive main.
  static CudaContext* context = new CudaContext(make_context());
  return *context;
}

}  // namespace strata::executor::cuda
