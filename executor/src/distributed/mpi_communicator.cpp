// The Open MPI backend: host tensors, one MPI communicator per group. The only file of the
// executor that calls MPI (ARCHITECTURE.md "Communicator").
#include <mpi.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "strata/executor/distributed/communicator.h"

namespace strata::executor {
namespace {

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

MPI_Datatype mpi_type(const Tensor& tensor, const char* operation) {
  STRATA_CHECK(tensor.device() == Device::cpu,
               "{}: the MPI backend moves host memory; this tensor is on {}", operation,
               device_name(tensor.device()));
  switch (tensor.scalar_type()) {
    case ScalarType::float32:
      return MPI_FLOAT;
    case ScalarType::float64:
      return MPI_DOUBLE;
    case ScalarType::int32:
      return MPI_INT;
    case ScalarType::bfloat16:
      break;
  }
  STRATA_CHECK(false, "{}: the MPI backend has no reduction for {}", operation,
               scalar_type_name(tensor.scalar_type()));
  return MPI_FLOAT;
}

int mpi_count(std::int64_t elements, const char* operation) {
  STRATA_CHECK(elements <= INT_MAX, "{}: {} elements in one call, more than MPI's int count",
               operation, elements);
  return static_cast<int>(elements);
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// Adds the time from construction to destruction to communication_seconds().
class BlockedInterval {
 public:
  BlockedInterval() : started_(std::chrono::steady_clock::now()) {}
  BlockedInterval(const BlockedInterval&) = delete;
  BlockedInterval& operator=(const BlockedInterval&) = delete;
  ~BlockedInterval() {
    record_communication_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  }

 private:
  std::chrono::steady_clock::time_point started_;
};

CommunicationRequest request_of(MPI_Request request) {
  // One MPI_Request shared by the wait and the test: after a successful MPI_Test it is
  // MPI_REQUEST_NULL, on which MPI_Wait returns at once.
  auto shared = std::make_shared<MPI_Request>(request);
  return CommunicationRequest([shared] { MPI_Wait(shared.get(), MPI_STATUS_IGNORE); },
                              [shared] {
                                int done = 0;
                                MPI_Test(shared.get(), &done, MPI_STATUS_IGNORE);
                                return done != 0;
                              });
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `communicator` unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm communicator) : communicator_(communicator) {
    MPI_Comm_rank(communicator_, &rank_);
    MPI_Comm_size(communicator_, &size_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  ~MpiCommunicator() override {
    if (communicator_ != MPI_COMM_WORLD && !mpi_finalized()) MPI_Comm_free(&communicator_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce(Tensor& values, ReduceOp op) override {
    if (size_ == 1) return;
    const BlockedInterval blocked;
    MPI_Allreduce(MPI_IN_PLACE, values.raw(), mpi_count(values.numel(), "all_reduce"),
                  mpi_type(values, "all_reduce"), mpi_op(op), communicator_);
  }

  CommunicationRequest all_reduce_async(Tensor& values, ReduceOp op) override {
    if (size_ == 1) return {};
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, values.raw(), mpi_count(values.numel(), "all_reduce"),
                   mpi_type(values, "all_reduce"), mpi_op(op), communicator_, &request);
    return request_of(request);
  }

  void all_gather(const Tensor& part, Tensor& whole) override {
    check_parts("all_gather", part, whole);
    const MPI_Datatype type = mpi_type(part, "all_gather");
    const int count = mpi_count(part.numel(), "all_gather");
    // MPI forbids a send buffer inside the receive buffer; this member's own slot is MPI_IN_PLACE.
    const auto* own_slot = static_cast<const char*>(whole.raw()) +
                           static_cast<std::size_t>(rank_) * part.bytes();
    const void* send = part.raw() == own_slot ? MPI_IN_PLACE : part.raw();
    const BlockedInterval blocked;
    MPI_Allgather(send, count, type, whole.raw(), count, type, communicator_);
  }

  void reduce_scatter(const Tensor& whole, Tensor& part) override {
    check_parts("reduce_scatter", part, whole);
    const BlockedInterval blocked;
    MPI_Reduce_scatter_block(whole.raw(), part.raw(), mpi_count(part.numel(), "reduce_scatter"),
                             mpi_type(part, "reduce_scatter"), MPI_SUM, communicator_);
  }

  void broadcast(Tensor& values, int root) override {
    const BlockedInterval blocked;
    MPI_Bcast(values.raw(), mpi_count(values.numel(), "broadcast"), mpi_type(values, "broadcast"),
              root, communicator_);
  }

  CommunicationRequest send_async(const Tensor& values, int peer, int tag) override {
    MPI_Request request;
    MPI_Isend(values.raw(), mpi_count(values.numel(), "send"), mpi_type(values, "send"), peer, tag,
              communicator_, &request);
    return request_of(request);
  }

  CommunicationRequest receive_async(Tensor& values, int peer, int tag) override {
    MPI_Request request;
    MPI_Irecv(values.raw(), mpi_count(values.numel(), "receive"), mpi_type(values, "receive"), peer,
              tag, communicator_, &request);
    return request_of(request);
  }

  void barrier() override {
    const BlockedInterval blocked;
    MPI_Barrier(communicator_);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm part;
    MPI_Comm_split(communicator_, color, key, &part);
    return std::make_unique<MpiCommunicator>(part);
  }

 protected:
  void abort_job(int exit_code) override { MPI_Abort(MPI_COMM_WORLD, exit_code); }

 private:
  void check_parts(const char* operation, const Tensor& part, const Tensor& whole) const {
    STRATA_CHECK(whole.numel() == part.numel() * size_ && whole.scalar_type() == part.scalar_type(),
                 "{}: {} elements for {} parts of {}", operation, whole.numel(), size_,
                 part.numel());
  }

  MPI_Comm communicator_;
  int rank_ = 0;
  int size_ = 1;
};

// MPI's lifetime: initialised on first use, finalised when the program exits normally.
struct MpiSession {
  std::unique_ptr<Communicator> world;
  MpiSession() {
    int provided = 0;
    // Only the main thread calls MPI (OpenMP threads run the kernels between calls).
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    world = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
    share_cores_between_local_ranks();
  }
  ~MpiSession() {
    world.reset();
    if (!mpi_finalized()) MPI_Finalize();
  }

  // Ranks on one machine share its cores: without an OMP_NUM_THREADS of the user's, each rank's
  // kernels get cores / local ranks threads (not every core each, which would oversubscribe),
  // and no more than the cores the launcher bound it to (Open MPI binds each of 2 ranks to one
  // core by default: two threads there would only take turns).
  static void share_cores_between_local_ranks() {
    if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local_ranks = 1;
    MPI_Comm_size(node, &local_ranks);
    MPI_Comm_free(&node);
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    int threads = std::max(1, cores / local_ranks);
    cpu_set_t bound;
    if (sched_getaffinity(0, sizeof(bound), &bound) == 0) {
      threads = std::min(threads, std::max(1, CPU_COUNT(&bound)));
    }
    omp_set_num_threads(threads);
  }
};

}  // namespace

bool launched_by_mpi() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(variable) != nullptr) return true;
  }
  return false;
}

int launch_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* value = std::getenv(variable)) return std::atoi(value);
  }
  return 0;
}

Communicator& world_communicator() {
  if (!launched_by_mpi()) {
    static std::unique_ptr<Communicator> solo = solo_communicator();
    return *solo;
  }
  static MpiSession session;
  return *session.world;
}

}  // namespace strata::executor
