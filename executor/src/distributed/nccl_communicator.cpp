// The NCCL backend (distributed/nccl_communicator.h). Built with NCCL only; without it,
// nccl_communicator() says so.
#include "strata/executor/distributed/nccl_communicator.h"

#include <fmt/format.h>

#include "strata/executor/cuda/cuda_device.h"

#if STRATA_HAVE_NCCL
#include <nccl.h>

#include "../cuda/cuda_check.h"
#include "../cuda/cuda_context.h"
#endif

namespace strata::executor {

#if STRATA_HAVE_NCCL
namespace {

[[noreturn]] void fail_nccl_call(ncclResult_t result, ncclComm_t comm, const char* call) {
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  throw DeviceError(fmt::format("{} failed: {}{}{}", call, ncclGetErrorString(result),
                                detail != nullptr && *detail != '\0' ? ": " : "",
                                detail != nullptr ? detail : ""));
}

#define STRATA_NCCL_CHECK(comm, call)                   \
  do {                                                  \
    const ncclResult_t strata_nccl_result_ = (call);    \
    if (strata_nccl_result_ != ncclSuccess) {           \
      fail_nccl_call(strata_nccl_result_, comm, #call); \
    }                                                   \
  } while (false)

ncclDataType_t nccl_type(const Tensor& tensor, const char* operation) {
  STRATA_CHECK(tensor.device() == Device::cuda,
               "{}: the NCCL backend moves device memory; this tensor is on {}", operation,
               device_name(tensor.device()));
  switch (tensor.scalar_type()) {
    case ScalarType::float32:
      return ncclFloat32;
    case ScalarType::float64:
      return ncclFloat64;
    case ScalarType::int32:
      return ncclInt32;
    case ScalarType::bfloat16:
      return ncclBfloat16;
  }
  STRATA_CHECK(false, "{}: no NCCL type for {}", operation, scalar_type_name(tensor.scalar_type()));
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  return ncclSum;
}

// Element `index` of `tensor`'s storage, as NCCL's untyped pointer.
const void* element(const Tensor& tensor, std::int64_t index) {
  return static_cast<const std::byte*>(tensor.raw()) +
         index * static_cast<std::int64_t>(scalar_bytes(tensor.scalar_type()));
}
void* element(Tensor& tensor, std::int64_t index) {
  return static_cast<std::byte*>(tensor.raw()) +
         index * static_cast<std::int64_t>(scalar_bytes(tensor.scalar_type()));
}

// A request for work queued on the stream: complete in stream order at once (wait() has nothing to
// do), complete on the GPU once the event recorded after it has passed.
CommunicationRequest stream_ordered_request() {
  cudaEvent_t event = nullptr;
  STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  STRATA_CUDA_CHECK(cudaEventRecord(event, cuda::current_stream()));
  std::shared_ptr<CUevent_st> owned(event, [](cudaEvent_t e) { (void)cudaEventDestroy(e); });
  return CommunicationRequest([] {},
                              [owned] { return cudaEventQuery(owned.get()) == cudaSuccess; });
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, Communicator& bootstrap) : comm_(comm), bootstrap_(bootstrap) {
    STRATA_NCCL_CHECK(comm_, ncclCommUserRank(comm_, &rank_));
    STRATA_NCCL_CHECK(comm_, ncclCommCount(comm_, &size_));
  }
  ~NcclCommunicator() override {
    // Work queued on this communicator must finish before NCCL frees its resources.
    (void)cudaStreamSynchronize(cuda::current_stream());
    (void)ncclCommDestroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce(Tensor& values, ReduceOp op) override {
    const ncclDataType_t type = nccl_type(values, "all_reduce");
    STRATA_NCCL_CHECK(comm_, ncclAllReduce(values.raw(), values.raw(), count(values), type,
                                           nccl_op(op), comm_, cuda::current_stream()));
  }
  CommunicationRequest all_reduce_async(Tensor& values, ReduceOp op) override {
    all_reduce(values, op);
    return stream_ordered_request();
  }

  void all_gather(const Tensor& part, Tensor& whole) override {
    const ncclDataType_t type = nccl_type(part, "all_gather");
    check_same_type(part, whole, "all_gather");
    STRATA_CHECK(whole.numel() == part.numel() * size_,
                 "all_gather: {} elements gathered from {} members of {}", whole.numel(), size_,
                 part.numel());
    // In place when `part` is this member's slot of `whole`: NCCL reads it from there.
    STRATA_NCCL_CHECK(comm_, ncclAllGather(part.raw(), whole.raw(), count(part), type, comm_,
                                           cuda::current_stream()));
  }

  void reduce_scatter(const Tensor& whole, Tensor& part) override {
    const ncclDataType_t type = nccl_type(whole, "reduce_scatter");
    check_same_type(part, whole, "reduce_scatter");
    STRATA_CHECK(whole.numel() == part.numel() * size_,
                 "reduce_scatter: {} elements scattered to {} members of {}", whole.numel(), size_,
                 part.numel());
    STRATA_NCCL_CHECK(comm_, ncclReduceScatter(whole.raw(), part.raw(), count(part), type, ncclSum,
                                               comm_, cuda::current_stream()));
  }

  void broadcast(Tensor& values, int root) override {
    const ncclDataType_t type = nccl_type(values, "broadcast");
    check_member(root, "broadcast from");
    STRATA_NCCL_CHECK(comm_, ncclBroadcast(values.raw(), values.raw(), count(values), type, root,
                                           comm_, cuda::current_stream()));
  }

  void all_to_all(const Tensor& send, const std::vector<std::int64_t>& send_counts, Tensor& receive,
                  const std::vector<std::int64_t>& receive_counts) override {
    const AllToAllOffsets offsets =
        all_to_all_offsets(size_, send, send_counts, receive, receive_counts);
    const ncclDataType_t type = nccl_type(send, "all_to_all");
    nccl_type(receive, "all_to_all");
    // One group: NCCL pairs every member's sends and receives together, as MPI_Alltoallv does.
    STRATA_NCCL_CHECK(comm_, ncclGroupStart());
    for (int peer = 0; peer < size_; ++peer) {
      const auto j = static_cast<std::size_t>(peer);
      if (send_counts[j] > 0) {
        STRATA_NCCL_CHECK(comm_, ncclSend(element(send, offsets.send[j]),
                                          static_cast<std::size_t>(send_counts[j]), type, peer,
                                          comm_, cuda::current_stream()));
      }
      if (receive_counts[j] > 0) {
        STRATA_NCCL_CHECK(comm_, ncclRecv(element(receive, offsets.receive[j]),
                                          static_cast<std::size_t>(receive_counts[j]), type, peer,
                                          comm_, cuda::current_stream()));
      }
    }
    STRATA_NCCL_CHECK(comm_, ncclGroupEnd());
  }

  CommunicationRequest send_async(const Tensor& values, int peer, int /*tag*/) override {
    const ncclDataType_t type = nccl_type(values, "send");
    check_peer(peer, "send to");
    STRATA_NCCL_CHECK(
        comm_, ncclSend(values.raw(), count(values), type, peer, comm_, cuda::current_stream()));
    return stream_ordered_request();
  }

  CommunicationRequest receive_async(Tensor& values, int peer, int /*tag*/) override {
    const ncclDataType_t type = nccl_type(values, "receive");
    check_peer(peer, "receive from");
    STRATA_NCCL_CHECK(
        comm_, ncclRecv(values.raw(), count(values), type, peer, comm_, cuda::current_stream()));
    return stream_ordered_request();
  }

  // Every member has reached it, and this rank's queued work has finished, when it returns.
  void barrier() override {
    Tensor token = Tensor::zeros({1}, ScalarType::float32, Device::cuda);
    all_reduce(token, ReduceOp::sum);
    STRATA_CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream()));
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    STRATA_CHECK(color >= 0, "split: color {} (every member joins a group)", color);
    ncclComm_t part = nullptr;
    STRATA_NCCL_CHECK(comm_, ncclCommSplit(comm_, color, key, &part, nullptr));
    return std::make_unique<NcclCommunicator>(part, bootstrap_);
  }

 protected:
  void abort_job(int exit_code) override {
    (void)ncclCommAbort(comm_);
    bootstrap_.abort(exit_code);
  }

 private:
  static std::size_t count(const Tensor& tensor) {
    return static_cast<std::size_t>(tensor.numel());
  }
  static void check_same_type(const Tensor& a, const Tensor& b, const char* operation) {
    STRATA_CHECK(a.scalar_type() == b.scalar_type() && a.device() == b.device(),
                 "{}: {} on {} beside {} on {}", operation, scalar_type_name(a.scalar_type()),
                 device_name(a.device()), scalar_type_name(b.scalar_type()),
                 device_name(b.device()));
  }
  void check_member(int member, const char* what) const {
    STRATA_CHECK(member >= 0 && member < size_, "{} rank {} in a group of {}", what, member, size_);
  }
  void check_peer(int peer, const char* what) const {
    check_member(peer, what);
    STRATA_CHECK(peer != rank_, "{} itself (rank {}): pair a send with its receive in all_to_all",
                 what, peer);
  }

  ncclComm_t comm_ = nullptr;
  Communicator& bootstrap_;
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> nccl_communicator(Communicator& bootstrap) {
  std::string why_not;
  if (!cuda_device_info(&why_not)) {
    throw DeviceError(fmt::format("NCCL needs a GPU: {}", why_not));
  }
  cuda::cuda_context();  // selects the backend's device before NCCL binds to it
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) STRATA_NCCL_CHECK(nullptr, ncclGetUniqueId(&id));
  static_assert(sizeof(id) % sizeof(std::int32_t) == 0);
  Tensor id_words =
      Tensor::borrow(&id, {static_cast<std::int64_t>(sizeof(id) / 4)}, ScalarType::int32);
  bootstrap.broadcast(id_words, 0);
  ncclComm_t comm = nullptr;
  STRATA_NCCL_CHECK(nullptr, ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
  return std::make_unique<NcclCommunicator>(comm, bootstrap);
}

#else

std::unique_ptr<Communicator> nccl_communicator(Communicator&) {
  throw DeviceError(
      "this build has no NCCL backend (NCCL was not found beside the CUDA toolkit when it was "
      "configured)");
}

#endif

}  // namespace strata::executor
