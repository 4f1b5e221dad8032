// The NCCL communicator on the lent GPU, at world size 1 (NCCL refuses two ranks on one GPU, so
// more members need a machine with several): it starts from a bootstrap communicator, every
// collective leaves what a group of one computes on device memory of each dtype, a non-blocking
// all-reduce hands back a request that completes, split() gives a working communicator, and host
// tensors or absent peers are refused with the operation named. A group of one's reduction leaves
// its input, so these tests cannot see whether a kernel after a collective waits for it: that
// ordering needs a machine with several GPUs to check.
#include "strata/executor/distributed/nccl_communicator.h"

#include <gtest/gtest.h>

#include <string>

#include "cuda_testing.h"
#include "strata/executor/ops/residual.h"

namespace strata::executor {
namespace {

using testing::from_gpu;
using testing::on_gpu;
using testing::random_in;

class NcclCommunicatorTest : public testing::CudaTest,
                             public ::testing::WithParamInterface<ScalarType> {
 protected:
  void SetUp() override {
    testing::CudaTest::SetUp();
    if (IsSkipped()) return;
    if (!kNcclBackendBuilt) GTEST_SKIP() << "this build has no NCCL";
    bootstrap_ = solo_communicator();
    nccl_ = nccl_communicator(*bootstrap_);
  }

  std::unique_ptr<Communicator> bootstrap_;
  std::unique_ptr<Communicator> nccl_;
};

// Exactly equal element by element: a group of one moves values, it does not round them.
void expect_same_values(const Tensor& got_gpu, const Tensor& want) {
  EXPECT_EQ(testing::normalized_error(from_gpu(got_gpu), want), 0.0);
}

TEST_P(NcclCommunicatorTest, CollectivesOfOneMemberLeaveItsValues) {
  const ScalarType type = GetParam();
  EXPECT_EQ(nccl_->backend(), "nccl");
  EXPECT_EQ(nccl_->rank(), 0);
  EXPECT_EQ(nccl_->size(), 1);
  const Tensor values = random_in({1001}, type, 7);
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    Tensor device = on_gpu(values, type);
    nccl_->all_reduce(device, op);
    expect_same_values(device, values);
  }
  Tensor broadcast = on_gpu(values, type);
  nccl_->broadcast(broadcast, 0);
  expect_same_values(broadcast, values);

  Tensor whole = Tensor::zeros({1001}, type, Device::cuda);
  nccl_->all_gather(on_gpu(values, type), whole);
  expect_same_values(whole, values);
  nccl_->all_gather(whole.view(0, {1001}), whole);  // in place: the part is its own slot
  expect_same_values(whole, values);
  Tensor part = Tensor::zeros({1001}, type, Device::cuda);
  nccl_->reduce_scatter(on_gpu(values, type), part);
  expect_same_values(part, values);
}

TEST_P(NcclCommunicatorTest, AllToAllSendsTheBlockToItself) {
  const ScalarType type = GetParam();
  const Tensor values = random_in({640}, type, 8);
  Tensor received = Tensor::zeros({640}, type, Device::cuda);
  nccl_->all_to_all(on_gpu(values, type), {640}, received, {640});
  expect_same_values(received, values);
  Tensor empty_send = Tensor::zeros({0}, type, Device::cuda);
  Tensor empty_receive = Tensor::zeros({0}, type, Device::cuda);
  nccl_->all_to_all(empty_send, {0}, empty_receive, {0});  // a member with no tokens this step
}

// The non-blocking all-reduce's tensor feeds the next op without a wait on the host, and the
// request reports completion once the GPU has passed it.
TEST_P(NcclCommunicatorTest, AsyncAllReduceCompletesAndFeedsTheNextOp) {
  const ScalarType type = GetParam();
  const Tensor a = random_in({4096}, type, 9), b = random_in({4096}, type, 10);
  Tensor reduced = on_gpu(a, type);
  CommunicationRequest request = nccl_->all_reduce_async(reduced, ReduceOp::sum);
  Tensor sum = Tensor::zeros({4096}, type, Device::cuda);
  residual_forward(reduced, on_gpu(b, type), sum);
  request.wait();
  Tensor want = Tensor::zeros({4096}, ScalarType::float64);
  residual_forward(a, b, want);
  EXPECT_CLOSE_TO_REFERENCE(sum, want, type);
  cuda_synchronize();
  EXPECT_TRUE(request.completed());
  nccl_->barrier();
}

TEST_P(NcclCommunicatorTest, SplitGivesAWorkingCommunicator) {
  const ScalarType type = GetParam();
  std::unique_ptr<Communicator> group = nccl_->split(3, 0);
  EXPECT_EQ(group->backend(), "nccl");
  EXPECT_EQ(group->size(), 1);
  const Tensor values = random_in({300}, type, 11);
  Tensor device = on_gpu(values, type);
  group->all_reduce(device, ReduceOp::sum);
  expect_same_values(device, values);
}

TEST_P(NcclCommunicatorTest, RefusesHostTensorsAndAbsentPeers) {
  const ScalarType type = GetParam();
  Tensor host = Tensor::zeros({4}, type);
  try {
    nccl_->all_reduce(host, ReduceOp::sum);
    ADD_FAILURE() << "a host tensor was accepted";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("all_reduce: the NCCL backend moves device memory"),
              std::string::npos)
        << error.what();
  }
  Tensor device = Tensor::zeros({4}, type, Device::cuda);
  EXPECT_ANY_THROW(nccl_->send_async(device, 1, 0));
  EXPECT_ANY_THROW(nccl_->receive_async(device, 0, 0));  // itself: pair it in all_to_all
  EXPECT_ANY_THROW(nccl_->broadcast(device, 2));
}

INSTANTIATE_TEST_SUITE_P(Types, NcclCommunicatorTest,
                         ::testing::Values(ScalarType::float32, ScalarType::bfloat16),
                         testing::type_label);

}  // namespace
}  // namespace strata::executor
