#include "strata/executor/distributed/device_routed_communicator.h"

#include <functional>
#include <string>

#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/distributed/nccl_communicator.h"
#include "strata/executor/distributed/typed_collectives.h"

namespace strata::executor {
namespace {

bool on_device(const Tensor& tensor) { return tensor.device() == Device::cuda; }

class DeviceRoutedCommunicator final : public Communicator {
 public:
  // `host` is borrowed (the job's world) when `owned_host` is null.
  DeviceRoutedCommunicator(Communicator& host, std::unique_ptr<Communicator> owned_host,
                           std::unique_ptr<Communicator> device)
      : owned_host_(std::move(owned_host)), host_(host), device_(std::move(device)) {
    STRATA_CHECK(host_.size() == device_->size() && host_.rank() == device_->rank(),
                 "NCCL ranks {} of {} beside MPI ranks {} of {}", device_->rank(), device_->size(),
                 host_.rank(), host_.size());
  }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string backend() const override {
    return device_->backend() + " (device tensors), " + host_.backend();
  }

  void all_reduce(Tensor& values, ReduceOp op) override { route(values).all_reduce(values, op); }
  CommunicationRequest all_reduce_async(Tensor& values, ReduceOp op) override {
    return route(values).all_reduce_async(values, op);
  }
  void all_gather(const Tensor& part, Tensor& whole) override {
    route(part, whole).all_gather(part, whole);
  }
  void reduce_scatter(const Tensor& whole, Tensor& part) override {
    route(whole, part).reduce_scatter(whole, part);
  }
  void broadcast(Tensor& values, int root) override { route(values).broadcast(values, root); }
  void all_to_all(const Tensor& send, const std::vector<std::int64_t>& send_counts, Tensor& receive,
                  const std::vector<std::int64_t>& receive_counts) override {
    route(send, receive).all_to_all(send, send_counts, receive, receive_counts);
  }
  // Point to point through MPI: see the header.
  CommunicationRequest send_async(const Tensor& values, int peer, int tag) override {
    return host_.send_async(values, peer, tag);
  }
  CommunicationRequest receive_async(Tensor& values, int peer, int tag) override {
    return host_.receive_async(values, peer, tag);
  }
  void barrier() override {
    cuda_synchronize();  // this rank's queued collectives have finished when it returns
    host_.barrier();
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    std::unique_ptr<Communicator> host = host_.split(color, key);
    std::unique_ptr<Communicator> device = device_->split(color, key);
    Communicator& borrowed = *host;
    return std::make_unique<DeviceRoutedCommunicator>(borrowed, std::move(host), std::move(device));
  }

 protected:
  void abort_job(int exit_code) override { host_.abort(exit_code); }

 private:
  Communicator& route(const Tensor& values) { return on_device(values) ? *device_ : host_; }
  // Both on the GPU: NCCL; otherwise MPI, which stages whichever is on the device.
  Communicator& route(const Tensor& first, const Tensor& second) {
    return on_device(first) && on_device(second) ? *device_ : host_;
  }

  std::unique_ptr<Communicator> owned_host_;
  Communicator& host_;
  std::unique_ptr<Communicator> device_;
};

}  // namespace

bool every_rank_has_its_own_gpu(Communicator& world) {
  const std::string identity = cuda_device_identity();
  // MPI_Comm_split's colors are non-negative ints.
  const int color = static_cast<int>(std::hash<std::string>{}(identity)&0x3FFFFFFFu);
  const std::unique_ptr<Communicator> same_gpu = world.split(color, world.rank());
  return all_reduce_value(world, static_cast<double>(same_gpu->size()), ReduceOp::max) == 1.0;
}

std::unique_ptr<Communicator> device_routed_communicator(Communicator& world) {
  return std::make_unique<DeviceRoutedCommunicator>(world, nullptr, nccl_communicator(world));
}

std::unique_ptr<Communicator> nccl_world_if_each_rank_has_a_gpu(Communicator& world) {
  if (!kNcclBackendBuilt || !every_rank_has_its_own_gpu(world)) return nullptr;
  return device_routed_communicator(world);
}

}  // namespace strata::executor
