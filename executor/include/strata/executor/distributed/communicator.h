// Communicator: the collectives and point-to-point transfers a parallel run needs, over one group
// of ranks. Executor code talks to this interface only; the backends are Open MPI (host tensors,
// process launch by mpirun or srun), a one-rank backend for runs without a launcher, and NCCL
// between GPUs (distributed/nccl_communicator.h).
//
// Ranks are numbered 0 … size−1 inside the communicator. Every collective is called by every
// member in the same order with tensors of the same type and size (the MPI rule); a tensor
// argument is contiguous memory: host memory for the MPI backend, which stages a device tensor
// through a host copy (CUDA ranks sharing a GPU), device memory for the NCCL backend. A failure inside the backend ends the whole job
// (MPI_ERRORS_ARE_FATAL): no rank waits for a peer that is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

enum class ReduceOp { sum, max, min };

// A non-blocking operation in flight. wait() returns once it has completed (the tensors it
// reads or writes may then be reused); destroying a pending request waits for it too. completed()
// asks without blocking, for a rank that must stay idle without spinning a core.
class CommunicationRequest {
 public:
  CommunicationRequest() = default;  // nothing in flight
  // `test` says without blocking whether the operation has completed; absent, wait() is called.
  explicit CommunicationRequest(std::function<void()> wait, std::function<bool()> test = nullptr)
      : wait_(std::move(wait)), test_(std::move(test)) {}
  CommunicationRequest(CommunicationRequest&& other) noexcept;
  CommunicationRequest& operator=(CommunicationRequest&& other) noexcept;
  ~CommunicationRequest();
  void wait();
  bool completed();

 private:
  std::function<void()> wait_;
  std::function<bool()> test_;
};

// Seconds this process has spent blocked in communication — inside a blocking collective or in
// CommunicationRequest::wait — over every communicator since it started. The difference over a
// step is that step's exposed communication (with waiting for slower peers folded in).
double communication_seconds();

// For communicator backends: adds a blocked interval to communication_seconds().
void record_communication_seconds(double seconds);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi" or "solo", for logs.
  virtual std::string backend() const = 0;

  // In place: every member ends with the element-wise reduction over all members' tensors.
  virtual void all_reduce(Tensor& values, ReduceOp op) = 0;
  virtual CommunicationRequest all_reduce_async(Tensor& values, ReduceOp op) = 0;
  // whole = every member's `part` one after another, in rank order (whole has size × part's
  // elements). `part` may be this member's own slot of `whole`: the gather then runs in place.
  virtual void all_gather(const Tensor& part, Tensor& whole) = 0;
  // part = this member's slice (rank·n … (rank+1)·n − 1) of the element-wise sum of every
  // member's `whole` (whole has size × part's elements).
  virtual void reduce_scatter(const Tensor& whole, Tensor& part) = 0;
  // Every member ends with root's `values`.
  virtual void broadcast(Tensor& values, int root) = 0;
  // The personalised exchange (MPI_Alltoallv): `send` holds one block per member in rank order,
  // send_counts[j] elements for member j; `receive` ends with one block per member in rank order,
  // receive_counts[j] elements from member j. Member i's send_counts[j] must be member j's
  // receive_counts[i] (a caller exchanges the counts first when only the sender knows them). How a
  // MoE layer's dispatched tokens reach the ranks that hold their experts, and come back.
  virtual void all_to_all(const Tensor& send, const std::vector<std::int64_t>& send_counts,
                          Tensor& receive, const std::vector<std::int64_t>& receive_counts) = 0;
  virtual CommunicationRequest send_async(const Tensor& values, int peer, int tag) = 0;
  virtual CommunicationRequest receive_async(Tensor& values, int peer, int tag) = 0;
  virtual void barrier() = 0;

  // Collective over this communicator: the members passing the same `color` form one new
  // communicator, ranked by `key` (MPI_Comm_split). Every member gets the one it is in.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Ends every rank of the job at once with `exit_code` (after the caller printed why): the
  // way out of an error that only some ranks see, which would leave the others waiting.
  [[noreturn]] void abort(int exit_code);

 protected:
  // The backend's way to end the job; abort() ends this process if it returns.
  virtual void abort_job(int exit_code) = 0;
};

// True when this process was started by an MPI launcher (mpirun, mpiexec, or srun with PMIx/PMI):
// then world_communicator() joins the job; otherwise it is a job of one.
bool launched_by_mpi();
// This process's rank as the launcher set it in the environment, before MPI starts (0 without a
// launcher): who prints what every rank would print alike, such as a command-line error.
int launch_rank();

// The communicator of every rank of the job. Initialises MPI on first use when launched_by_mpi()
// (and finalises it at exit); otherwise returns the one-rank backend without touching MPI.
Communicator& world_communicator();

// A communicator of one rank: collectives copy or leave their input, as a group of one would.
std::unique_ptr<Communicator> solo_communicator();

// For backends: checks all_to_all's arguments against a group of `members` (a count per member,
// none negative, the tensors of one type and as long as their counts add up to) and returns each
// block's first element in `send` and in `receive`, as MPI's displacements are.
struct AllToAllOffsets {
  std::vector<std::int64_t> send, receive;
};
AllToAllOffsets all_to_all_offsets(int members, const Tensor& send,
                                   const std::vector<std::int64_t>& send_counts,
                                   const Tensor& receive,
                                   const std::vector<std::int64_t>& receive_counts);

}  // namespace strata::executor
