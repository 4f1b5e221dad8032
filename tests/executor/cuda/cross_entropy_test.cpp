// CUDA against the CPU for the softmax cross-entropy: the whole vocabulary's loss and log-sum-exp,
// a shard's statistics (vocab-parallel loss) and their combination after the tp all-reduces,
// and the backward written over the logits.
#include "strata/executor/ops/cross_entropy.h"

#include <gtest/gtest.h>

#include "cuda_testing.h"

namespace strata::executor {
namespace {

using testing::on_gpu;
using testing::random_in;

class CudaCrossEntropy : public testing::CudaTest,
                         public ::testing::WithParamInterface<ScalarType> {};

class CudaCrossEntropyShards : public testing::CudaTest {};

constexpr std::int64_t kRows = 33;

Tensor targets_below(std::int64_t vocab) {
  Tensor targets = Tensor::zeros({kRows}, ScalarType::int32);
  for (std::int64_t n = 0; n < kRows; ++n) {
    targets.data<std::int32_t>()[n] = static_cast<std::int32_t>((n * 37 + 11) % vocab);
  }
  return targets;
}

TEST_P(CudaCrossEntropy, ForwardAndBackwardInPlace) {
  const ScalarType type = GetParam();
  for (const std::int64_t vocab : {512, 300}) {
    const Tensor logits = random_in({kRows, vocab}, type, 1, 4.0);
    const Tensor targets = targets_below(vocab);
    Tensor losses = Tensor::zeros({kRows}, ScalarType::float64);
    Tensor lse = Tensor::zeros({kRows}, ScalarType::float64);
    cross_entropy_forward(logits, targets, losses, lse);
    Tensor logits_gpu = on_gpu(logits, type);
    const Tensor targets_gpu = targets.to(Device::cuda);
    Tensor losses_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
    Tensor lse_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
    cross_entropy_forward(logits_gpu, targets_gpu, losses_gpu, lse_gpu);
    EXPECT_CLOSE_TO_REFERENCE(losses_gpu, losses, ScalarType::float32);
    EXPECT_CLOSE_TO_REFERENCE(lse_gpu, lse, ScalarType::float32);

    Tensor dlogits = Tensor::zeros_like(logits);
    cross_entropy_backward(logits, targets, lse, 1.0 / kRows, dlogits);
    cross_entropy_backward(logits_gpu, targets_gpu, lse_gpu, 1.0 / kRows, logits_gpu);
    EXPECT_CLOSE_TO_REFERENCE(logits_gpu, dlogits, type);
  }
}

TEST_P(CudaCrossEntropy, ShardStatisticsAndBackward) {
  const ScalarType type = GetParam();
  constexpr std::int64_t kShard = 160, kStart = 320;
  const Tensor logits = random_in({kRows, kShard}, type, 2, 4.0);
  const Tensor targets = targets_below(640);
  Tensor row_max = Tensor::zeros({kRows}, ScalarType::float64);
  Tensor row_sum = Tensor::zeros({kRows}, ScalarType::float64);
  Tensor target_logit = Tensor::zeros({kRows}, ScalarType::float64);
  cross_entropy_shard_statistics(logits, targets, kStart, row_max, row_sum, target_logit);
  const Tensor logits_gpu = on_gpu(logits, type);
  const Tensor targets_gpu = targets.to(Device::cuda);
  Tensor row_max_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
  Tensor row_sum_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
  Tensor target_logit_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
  cross_entropy_shard_statistics(logits_gpu, targets_gpu, kStart, row_max_gpu, row_sum_gpu,
                                 target_logit_gpu);
  EXPECT_CLOSE_TO_REFERENCE(row_max_gpu, row_max, ScalarType::float32);
  EXPECT_CLOSE_TO_REFERENCE(row_sum_gpu, row_sum, ScalarType::float32);
  EXPECT_CLOSE_TO_REFERENCE(target_logit_gpu, target_logit, ScalarType::float32);

  // Some rows' targets fall in the shard, others not: both cases are in the comparison.
  const Tensor lse = random_in({kRows}, ScalarType::float32, 3);
  Tensor dlogits = Tensor::zeros_like(logits);
  cross_entropy_backward(logits, targets, lse, 0.5, dlogits, kStart);
  Tensor dlogits_gpu = Tensor::zeros(logits.shape(), type, Device::cuda);
  cross_entropy_backward(logits_gpu, targets_gpu, on_gpu(lse, ScalarType::float32), 0.5,
                         dlogits_gpu, kStart);
  EXPECT_CLOSE_TO_REFERENCE(dlogits_gpu, dlogits, type);
}

// Between and after the vocab-parallel loss's all-reduces: a shard's sums rescaled to the global
// maxima, then the losses and log-sum-exps from the summed statistics (float32 on the GPU).
TEST_F(CudaCrossEntropyShards, SumsRescaledAndLossesCombined) {
  const Tensor row_max = random_in({kRows}, ScalarType::float32, 4, 3.0);
  Tensor global_max = random_in({kRows}, ScalarType::float32, 5, 1.0);
  for (std::int64_t n = 0; n < kRows; ++n) {  // the global max is at least the shard's
    global_max.data<double>()[n] =
        row_max.data<double>()[n] + std::abs(global_max.data<double>()[n]);
  }
  Tensor sums = random_in({kRows}, ScalarType::float32, 6, 4.0);
  for (std::int64_t n = 0; n < kRows; ++n)
    sums.data<double>()[n] = 1.0 + std::abs(sums.data<double>()[n]);
  Tensor sums_gpu = on_gpu(sums, ScalarType::float32);
  cross_entropy_rescale_shard_sums(row_max, global_max, sums);
  cross_entropy_rescale_shard_sums(on_gpu(row_max, ScalarType::float32),
                                   on_gpu(global_max, ScalarType::float32), sums_gpu);
  EXPECT_CLOSE_TO_REFERENCE(sums_gpu, sums, ScalarType::float32);

  const Tensor target_logit = random_in({kRows}, ScalarType::float32, 7, 4.0);
  Tensor losses = Tensor::zeros({kRows}, ScalarType::float64);
  Tensor lse = Tensor::zeros({kRows}, ScalarType::float64);
  cross_entropy_shard_losses(global_max, sums, target_logit, losses, lse);
  Tensor losses_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
  Tensor lse_gpu = Tensor::zeros({kRows}, ScalarType::float32, Device::cuda);
  cross_entropy_shard_losses(on_gpu(global_max, ScalarType::float32),
                             on_gpu(sums, ScalarType::float32),
                             on_gpu(target_logit, ScalarType::float32), losses_gpu, lse_gpu);
  EXPECT_CLOSE_TO_REFERENCE(losses_gpu, losses, ScalarType::float32);
  EXPECT_CLOSE_TO_REFERENCE(lse_gpu, lse, ScalarType::float32);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaCrossEntropy, ::testing::ValuesIn(testing::kCudaTypes),
                         testing::type_label);

}  // namespace
}  // namespace strata::executor
