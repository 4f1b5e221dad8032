// The communicator a CUDA job with a GPU per rank builds its groups over, at world size 1 on the
// lent GPU: device tensors go to NCCL, host tensors and point-to-point transfers to the MPI side
// (here a counting wrapper of the one-rank backend, so that each call's route shows), and a
// split keeps routing. A job of one has its own GPU.
#include "strata/executor/distributed/device_routed_communicator.h"

#include <gtest/gtest.h>

#include "cuda_testing.h"
#include "strata/executor/distributed/nccl_communicator.h"

namespace strata::executor {
namespace {

using testing::on_gpu;
using testing::random_in;

// The one-rank backend, counting the collectives that reach it.
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(int* calls) : calls_(calls), inner_(solo_communicator()) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "counting"; }
  void all_reduce(Tensor& values, ReduceOp op) override {
    ++*calls_;
    inner_->all_reduce(values, op);
  }
  CommunicationRequest all_reduce_async(Tensor& values, ReduceOp op) override {
    ++*calls_;
    return inner_->all_reduce_async(values, op);
  }
  void all_gather(const Tensor& part, Tensor& whole) override {
    ++*calls_;
    inner_->all_gather(part, whole);
  }
  void reduce_scatter(const Tensor& whole, Tensor& part) override {
    ++*calls_;
    inner_->reduce_scatter(whole, part);
  }
  void broadcast(Tensor& values, int root) override {
    ++*calls_;
    inner_->broadcast(values, root);
  }
  void all_to_all(const Tensor& send, const std::vector<std::int64_t>& send_counts, Tensor& receive,
                  const std::vector<std::int64_t>& receive_counts) override {
    ++*calls_;
    inner_->all_to_all(send, send_counts, receive, receive_counts);
  }
  CommunicationRequest send_async(const Tensor& values, int peer, int tag) override {
    ++*calls_;
    return inner_->send_async(values, peer, tag);
  }
  CommunicationRequest receive_async(Tensor& values, int peer, int tag) override {
    ++*calls_;
    return inner_->receive_async(values, peer, tag);
  }
  void barrier() override { ++*calls_; }
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<CountingCommunicator>(calls_);
  }

 protected:
  void abort_job(int) override {}

 private:
  int* calls_;
  std::unique_ptr<Communicator> inner_;
};

class DeviceRoutedCommunicatorTest : public testing::CudaTest {
 protected:
  void SetUp() override {
    testing::CudaTest::SetUp();
    if (IsSkipped()) return;
    if (!kNcclBackendBuilt) GTEST_SKIP() << "this build has no NCCL";
  }
};

TEST_F(DeviceRoutedCommunicatorTest, DeviceTensorsGoToNcclAndTheRestToTheHostSide) {
  int host_calls = 0;
  CountingCommunicator world(&host_calls);
  EXPECT_TRUE(every_rank_has_its_own_gpu(world));
  const std::unique_ptr<Communicator> routed = device_routed_communicator(world);
  EXPECT_EQ(routed->backend(), "nccl (device tensors), counting");
  const std::unique_ptr<Communicator> group = routed->split(0, 0);
  for (Communicator* communicator : {routed.get(), group.get()}) {
    const Tensor values = random_in({257}, ScalarType::float32, 3);
    Tensor device = on_gpu(values, ScalarType::float32);
    Tensor whole = Tensor::zeros({257}, ScalarType::float32, Device::cuda);
    const int before = host_calls;
    communicator->all_reduce(device, ReduceOp::sum);
    communicator->all_reduce_async(device, ReduceOp::max).wait();
    communicator->all_gather(device, whole);
    communicator->reduce_scatter(whole, device);
    communicator->broadcast(device, 0);
    EXPECT_EQ(host_calls, before) << "a device collective reached the host side";
    EXPECT_EQ(testing::normalized_error(testing::from_gpu(device), values), 0.0);

    Tensor host = Tensor::zeros({4}, ScalarType::float64);
    communicator->all_reduce(host, ReduceOp::sum);
    communicator->broadcast(host, 0);
    // A device part gathered into a host whole: MPI, which stages the device side.
    Tensor host_whole = Tensor::zeros({257}, ScalarType::float32);
    communicator->all_gather(device, host_whole);
    EXPECT_EQ(host_calls, before + 3);
  }
}

}  // namespace
}  // namespace strata::executor
