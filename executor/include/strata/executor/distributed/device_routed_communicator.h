// The communicator of a CUDA job whose ranks each have a GPU of their own: collectives over
// device tensors go to NCCL (on the backend's stream, no host copy), everything else to the MPI
// communicator — the host records every rank exchanges (losses, counts, norms), and the pipeline's
// sends and receives, which NCCL would have to pair up by group calls (Megatron's
// batch_isend_irecv) to keep two stages that send to each other from waiting on one another. A
// job whose ranks share a GPU cannot use NCCL (it refuses two ranks on one device) and keeps
// the MPI communicator, which stages device tensors through host memory. PyTorch keeps a Gloo
// and an NCCL process group side by side for the same reason.
#pragma once

#include <memory>

#include "strata/executor/distributed/communicator.h"

namespace strata::executor {

// Collective over `world`: true when no two of its ranks run on the same GPU (the same host and
// PCI bus id). A rank whose identity collides with another's by hash counts as sharing, which
// only costs the NCCL path, never correctness.
bool every_rank_has_its_own_gpu(Communicator& world);

// Collective over `world`: a communicator of the same ranks that routes device-tensor collectives
// to an NCCL communicator bootstrapped from `world` and the rest to `world`; its split() splits
// both. `world` must outlive it. Throws DeviceError without NCCL or a GPU.
std::unique_ptr<Communicator> device_routed_communicator(Communicator& world);

// What a CUDA job's process groups should be built over: the routed communicator where this
// build has NCCL and every rank has its own GPU, else nullptr (use `world` itself). Collective.
std::unique_ptr<Communicator> nccl_world_if_each_rank_has_a_gpu(Communicator& world);

}  // namespace strata::executor
