// The NCCL backend of Communicator: collectives and transfers between GPUs over tensors in device
// memory, queued on the CUDA backend's one stream, so that they run in order with the ops around
// them without the host waiting (Megatron's and PyTorch's ProcessGroupNCCL do the same on their
// compute stream when they do not overlap). One NCCL communicator per process group: split() is
// ncclCommSplit, so a mesh's tp/dp/pp groups come from the world's as the MPI backend's do.
//
// Where this backend's ordering differs from the MPI one: a request's wait() returns at once —
// the operation is complete *in stream order*, which is what every later op, copy and allocation
// on the backend's stream sees; completed() asks the GPU without blocking. NCCL has no message
// tags: between one pair of ranks, sends and receives match in the order they are posted.
// A failing NCCL call throws DeviceError naming the call and NCCL's reason.
#pragma once

#include <memory>

#include "strata/executor/distributed/communicator.h"

#ifndef STRATA_HAVE_NCCL
#define STRATA_HAVE_NCCL 0
#endif

namespace strata::executor {

// True when CMake found NCCL beside the CUDA toolkit (cmake/StrataCuda.cmake).
inline constexpr bool kNcclBackendBuilt = STRATA_HAVE_NCCL != 0;

// Collective over `bootstrap` (the MPI world, or the one-rank backend): its rank 0 makes NCCL's
// unique id, `bootstrap` broadcasts it, and every member joins one NCCL communicator of the same
// size and ranks on the CUDA backend's device. `bootstrap` must outlive the result (abort() goes
// through it). Throws DeviceError in a build without NCCL or when NCCL cannot start.
std::unique_ptr<Communicator> nccl_communicator(Communicator& bootstrap);

}  // namespace strata::executor
