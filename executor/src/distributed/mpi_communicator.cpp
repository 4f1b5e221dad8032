// The Open MPI backend: one MPI communicator per group, over host memory. Device tensors (CUDA
// ranks that share a GPU, where NCCL cannot run) travel through host copies. The only file of the
// executor that calls MPI (executor/README.md, "Communicator").
#include <fmt/format.h>
#include <mpi.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/executor/distributed/stall_watchdog.h"
#include "strata/executor/ops/convert.h"

namespace strata::executor {
namespace {

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

// The MPI type of a host tensor's elements. Reductions need arithmetic MPI has for every type
// but bfloat16 (staging widens device bfloat16 to float32 first); moving bfloat16 needs none,
// so it moves as 16-bit words.
MPI_Datatype mpi_type(const Tensor& tensor, const char* operation, bool reduces = true) {
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
      if (!reduces) return MPI_UINT16_T;
      break;
  }
  STRATA_CHECK(false, "{}: the MPI backend has no reduction for {}", operation,
               scalar_type_name(tensor.scalar_type()));
  return MPI_FLOAT;
}

// Host staging of device tensors. A reduction of bfloat16 runs in float32 (MPI has no bfloat16
// sum) and rounds once, when the result goes back to the device.
bool on_device(const Tensor& tensor) { return tensor.device() != Device::cpu; }

Tensor staged(const Tensor& device, bool reduces) {
  Tensor host = device.to(Device::cpu);
  if (!reduces || host.scalar_type() != ScalarType::bfloat16) return host;
  Tensor wide = Tensor::zeros(host.shape(), ScalarType::float32);
  convert(host, wide);
  return wide;
}

Tensor staging_buffer(const Tensor& device, bool reduces) {
  const bool widened = reduces && device.scalar_type() == ScalarType::bfloat16;
  return Tensor::zeros(device.shape(), widened ? ScalarType::float32 : device.scalar_type());
}

void unstage(const Tensor& host, Tensor& device) {
  if (host.scalar_type() == device.scalar_type()) {
    device.copy_from(host);
    return;
  }
  Tensor narrow = Tensor::zeros(host.shape(), device.scalar_type());
  convert(host, narrow);
  device.copy_from(narrow);
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

// A blocking communication: its time from construction to destruction is added to
// communication_seconds(), and the stall watchdog watches it meanwhile.
class BlockedInterval {
 public:
  BlockedInterval(const char* operation, std::int64_t elements, const std::string& group)
      : watched_(operation, elements, group), started_(std::chrono::steady_clock::now()) {}
  BlockedInterval(const BlockedInterval&) = delete;
  BlockedInterval& operator=(const BlockedInterval&) = delete;
  ~BlockedInterval() {
    record_communication_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  }

 private:
  BlockedCommunication watched_;
  std::chrono::steady_clock::time_point started_;
};

// What a wait on `request` is, for the stall watchdog: the operation, its elements and the
// world ranks it involves (kept with the request, which may outlive the call that made it).
CommunicationRequest request_of(MPI_Request request, const char* operation, std::int64_t elements,
                                std::string group) {
  // One MPI_Request shared by the wait and the test: after a successful MPI_Test it is
  // MPI_REQUEST_NULL, on which MPI_Wait returns at once.
  auto shared = std::make_shared<MPI_Request>(request);
  auto described = std::make_shared<const std::string>(std::move(group));
  return CommunicationRequest(
      [shared, described, operation, elements] {
        const BlockedCommunication watched(operation, elements, *described);
        MPI_Wait(shared.get(), MPI_STATUS_IGNORE);
      },
      [shared] {
        int done = 0;
        MPI_Test(shared.get(), &done, MPI_STATUS_IGNORE);
        return done != 0;
      });
}

// "world ranks 0-3", "world ranks 0, 2, 4 and 2 more": who a communicator's members are.
std::string world_ranks_of(MPI_Comm communicator, int size) {
  MPI_Group group, world_group;
  MPI_Comm_group(communicator, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> ranks(static_cast<std::size_t>(size)), world(ranks.size());
  for (int i = 0; i < size; ++i) ranks[static_cast<std::size_t>(i)] = i;
  MPI_Group_translate_ranks(group, size, ranks.data(), world_group, world.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  bool consecutive = true;
  for (int i = 1; i < size; ++i) {
    consecutive = consecutive && world[static_cast<std::size_t>(i)] == world[0] + i;
  }
  if (size == 1) return fmt::format("world rank {}", world[0]);
  if (consecutive) return fmt::format("world ranks {}-{}", world[0], world.back());
  constexpr int kShown = 8;
  std::string text = "world ranks ";
  for (int i = 0; i < std::min(size, kShown); ++i) {
    text += fmt::format("{}{}", i == 0 ? "" : ", ", world[static_cast<std::size_t>(i)]);
  }
  if (size > kShown) text += fmt::format(" and {} more", size - kShown);
  return text;
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `communicator` unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm communicator) : communicator_(communicator) {
    MPI_Comm_rank(communicator_, &rank_);
    MPI_Comm_size(communicator_, &size_);
    members_ = world_ranks_of(communicator_, size_);
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
    if (on_device(values)) {
      Tensor host = staged(values, true);
      all_reduce(host, op);
      unstage(host, values);
      return;
    }
    const BlockedInterval blocked("all_reduce", values.numel(), members_);
    MPI_Allreduce(MPI_IN_PLACE, values.raw(), mpi_count(values.numel(), "all_reduce"),
                  mpi_type(values, "all_reduce"), mpi_op(op), communicator_);
  }

  CommunicationRequest all_reduce_async(Tensor& values, ReduceOp op) override {
    if (size_ == 1) return {};
    if (on_device(values)) {  // staged: the copies bracket it, so it completes here
      all_reduce(values, op);
      return {};
    }
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, values.raw(), mpi_count(values.numel(), "all_reduce"),
                   mpi_type(values, "all_reduce"), mpi_op(op), communicator_, &request);
    return request_of(request, "all_reduce", values.numel(), members_);
  }

  void all_gather(const Tensor& part, Tensor& whole) override {
    check_parts("all_gather", part, whole);
    if (on_device(part) || on_device(whole)) {
      Tensor host_whole = staging_buffer(whole, false);
      all_gather(staged(part, false), host_whole);
      whole.copy_from(host_whole);
      return;
    }
    const MPI_Datatype type = mpi_type(part, "all_gather", false);
    const int count = mpi_count(part.numel(), "all_gather");
    // MPI forbids a send buffer inside the receive buffer; this member's own slot is MPI_IN_PLACE.
    const auto* own_slot =
        static_cast<const char*>(whole.raw()) + static_cast<std::size_t>(rank_) * part.bytes();
    const void* send = part.raw() == own_slot ? MPI_IN_PLACE : part.raw();
    const BlockedInterval blocked("all_gather", whole.numel(), members_);
    MPI_Allgather(send, count, type, whole.raw(), count, type, communicator_);
  }

  void reduce_scatter(const Tensor& whole, Tensor& part) override {
    check_parts("reduce_scatter", part, whole);
    if (on_device(whole) || on_device(part)) {
      Tensor host_part = staging_buffer(part, true);
      reduce_scatter(staged(whole, true), host_part);
      unstage(host_part, part);
      return;
    }
    const BlockedInterval blocked("reduce_scatter", whole.numel(), members_);
    MPI_Reduce_scatter_block(whole.raw(), part.raw(), mpi_count(part.numel(), "reduce_scatter"),
                             mpi_type(part, "reduce_scatter"), MPI_SUM, communicator_);
  }

  void broadcast(Tensor& values, int root) override {
    if (on_device(values)) {
      Tensor host = staged(values, false);
      broadcast(host, root);
      values.copy_from(host);
      return;
    }
    const BlockedInterval blocked("broadcast", values.numel(), members_);
    MPI_Bcast(values.raw(), mpi_count(values.numel(), "broadcast"),
              mpi_type(values, "broadcast", false), root, communicator_);
  }

  void all_to_all(const Tensor& send, const std::vector<std::int64_t>& send_counts, Tensor& receive,
                  const std::vector<std::int64_t>& receive_counts) override {
    const AllToAllOffsets offsets =
        all_to_all_offsets(size_, send, send_counts, receive, receive_counts);
    if (on_device(send) || on_device(receive)) {
      Tensor host_receive = staging_buffer(receive, false);
      all_to_all(staged(send, false), send_counts, host_receive, receive_counts);
      receive.copy_from(host_receive);
      return;
    }
    const auto as_int = [](const std::vector<std::int64_t>& values) {
      std::vector<int> converted;
      for (std::int64_t value : values) converted.push_back(mpi_count(value, "all_to_all"));
      return converted;
    };
    const std::vector<int> sent = as_int(send_counts), sent_at = as_int(offsets.send);
    const std::vector<int> received = as_int(receive_counts), received_at = as_int(offsets.receive);
    const MPI_Datatype type = mpi_type(send, "all_to_all", false);
    const BlockedInterval blocked("all_to_all", send.numel(), members_);
    MPI_Alltoallv(send.raw(), sent.data(), sent_at.data(), type, receive.raw(), received.data(),
                  received_at.data(), type, communicator_);
  }

  CommunicationRequest send_async(const Tensor& values, int peer, int tag) override {
    if (on_device(values)) {
      // The host copy lives until the send has completed.
      const Tensor host = staged(values, false);
      auto sending = std::make_shared<CommunicationRequest>(send_async(host, peer, tag));
      return CommunicationRequest([sending, host] { sending->wait(); },
                                  [sending] { return sending->completed(); });
    }
    MPI_Request request;
    MPI_Isend(values.raw(), mpi_count(values.numel(), "send"), mpi_type(values, "send", false),
              peer, tag, communicator_, &request);
    return request_of(request, "send", values.numel(), world_rank_of(peer));
  }

  CommunicationRequest receive_async(Tensor& values, int peer, int tag) override {
    if (on_device(values)) {
      // Received into host memory; the wait copies it to the device.
      Tensor host = staging_buffer(values, false);
      auto receiving = std::make_shared<CommunicationRequest>(receive_async(host, peer, tag));
      return CommunicationRequest(
          [receiving, host, target = values]() mutable {
            receiving->wait();
            target.copy_from(host);
          },
          [receiving] { return receiving->completed(); });
    }
    MPI_Request request;
    MPI_Irecv(values.raw(), mpi_count(values.numel(), "receive"),
              mpi_type(values, "receive", false), peer, tag, communicator_, &request);
    return request_of(request, "receive", values.numel(), world_rank_of(peer));
  }

  void barrier() override {
    const BlockedInterval blocked("barrier", 0, members_);
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

  // "world rank P" for a member of this communicator (looked up once per peer).
  const std::string& world_rank_of(int peer) {
    if (peer_names_.empty()) peer_names_.resize(static_cast<std::size_t>(size_));
    std::string& name = peer_names_.at(static_cast<std::size_t>(peer));
    if (!name.empty()) return name;
    MPI_Group group, world_group;
    MPI_Comm_group(communicator_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int world = 0;
    MPI_Group_translate_ranks(group, 1, &peer, world_group, &world);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    name = fmt::format("world rank {}", world);
    return name;
  }

  MPI_Comm communicator_;
  int rank_ = 0;
  int size_ = 1;
  std::string members_;  // the world ranks of the members, for the stall watchdog
  std::vector<std::string> peer_names_;
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
    set_stall_world_rank(world->rank());
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
