// CUDA against the CPU for the elementwise and gather ops: residual, GELU, SwiGLU, dropout,
// rotary, position and token embeddings (whole and a tensor-parallel rank's share), a separate
// bias, dtype conversion. Inputs are random (never zeros) and
// rounded to the dtype under test; the CPU computes in float64; gradients accumulate into random
// starting values on both sides, so the += contract is checked too.
#include <gtest/gtest.h>

#include "cuda_testing.h"
#include "strata/executor/ops/bias.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/ops/embedding.h"
#include "strata/executor/ops/gelu.h"
#include "strata/executor/ops/position_embedding.h"
#include "strata/executor/ops/residual.h"
#include "strata/executor/ops/rotary.h"
#include "strata/executor/ops/swiglu.h"
#include "strata/executor/tensor/bfloat16.h"

namespace strata::executor {
namespace {

using testing::from_gpu;
using testing::on_gpu;
using testing::random_in;

class CudaElementwise : public testing::CudaTest,
                        public ::testing::WithParamInterface<ScalarType> {};

// 16-byte vectors where the size allows, and the one-element path where it does not.
constexpr std::int64_t kVectorSize = 8 * 97;
constexpr std::int64_t kOddSize = 1001;

TEST_P(CudaElementwise, ResidualForwardAndBackward) {
  const ScalarType type = GetParam();
  for (const std::int64_t n : {kVectorSize, kOddSize}) {
    const Tensor a = random_in({n}, type, 1), b = random_in({n}, type, 2);
    Tensor y = Tensor::zeros({n}, ScalarType::float64);
    residual_forward(a, b, y);
    Tensor y_gpu = Tensor::zeros({n}, type, Device::cuda);
    residual_forward(on_gpu(a, type), on_gpu(b, type), y_gpu);
    EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);

    const Tensor dy = random_in({n}, type, 3);
    Tensor da = random_in({n}, type, 4), db = random_in({n}, type, 5);
    Tensor da_gpu = on_gpu(da, type), db_gpu = on_gpu(db, type);
    residual_backward(dy, da, db);
    residual_backward(on_gpu(dy, type), da_gpu, db_gpu);
    EXPECT_CLOSE_TO_REFERENCE(da_gpu, da, type);
    EXPECT_CLOSE_TO_REFERENCE(db_gpu, db, type);
  }
}

TEST_P(CudaElementwise, GeluForwardAndBackward) {
  const ScalarType type = GetParam();
  for (const std::int64_t n : {kVectorSize, kOddSize}) {
    const Tensor x = random_in({n}, type, 6, 2.0);
    Tensor y = Tensor::zeros({n}, ScalarType::float64);
    gelu_forward(x, y);
    Tensor y_gpu = Tensor::zeros({n}, type, Device::cuda);
    gelu_forward(on_gpu(x, type), y_gpu);
    EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);

    const Tensor dy = random_in({n}, type, 7);
    Tensor dx = random_in({n}, type, 8);
    Tensor dx_gpu = on_gpu(dx, type);
    gelu_backward(dy, x, dx);
    gelu_backward(on_gpu(dy, type), on_gpu(x, type), dx_gpu);
    EXPECT_CLOSE_TO_REFERENCE(dx_gpu, dx, type);

    // Overwrite mode: the GPU buffer starts with other values; the CPU's starts at zero.
    Tensor fresh = Tensor::zeros({n}, ScalarType::float64);
    Tensor fresh_gpu = on_gpu(random_in({n}, type, 9), type);
    gelu_backward(dy, x, fresh);
    gelu_backward(on_gpu(dy, type), on_gpu(x, type), fresh_gpu, GradientWrite::overwrite);
    EXPECT_CLOSE_TO_REFERENCE(fresh_gpu, fresh, type);
  }
}

TEST_P(CudaElementwise, SwigluForwardAndBackward) {
  const ScalarType type = GetParam();
  for (const std::int64_t n : {kVectorSize, kOddSize}) {
    const Tensor gate = random_in({n}, type, 9, 2.0), up = random_in({n}, type, 10);
    Tensor y = Tensor::zeros({n}, ScalarType::float64);
    swiglu_forward(gate, up, y);
    Tensor y_gpu = Tensor::zeros({n}, type, Device::cuda);
    swiglu_forward(on_gpu(gate, type), on_gpu(up, type), y_gpu);
    EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);

    const Tensor dy = random_in({n}, type, 11);
    Tensor dgate = random_in({n}, type, 12), dup = random_in({n}, type, 13);
    Tensor dgate_gpu = on_gpu(dgate, type), dup_gpu = on_gpu(dup, type);
    swiglu_backward(dy, gate, up, dgate, dup);
    swiglu_backward(on_gpu(dy, type), on_gpu(gate, type), on_gpu(up, type), dgate_gpu, dup_gpu);
    EXPECT_CLOSE_TO_REFERENCE(dgate_gpu, dgate, type);
    EXPECT_CLOSE_TO_REFERENCE(dup_gpu, dup, type);
  }
}

// The counter-based masks are the same on both backends, element for element: every element the
// CPU drops is dropped on the GPU and every kept one is scaled alike.
TEST_P(CudaElementwise, DropoutDrawsTheCpuMasks) {
  const ScalarType type = GetParam();
  constexpr std::int64_t kTokens = 37, kFeatures = 48;
  const DropoutKey key{.seed = 99,
                       .step = 7,
                       .site = 5,
                       .first_token = 1000,
                       .first_feature = 16,
                       .total_features = 96};
  const Tensor x = random_in({kTokens, kFeatures}, type, 14);
  Tensor y = Tensor::zeros(x.shape(), ScalarType::float64);
  dropout_forward(x, 0.3, key, y);
  Tensor y_gpu = Tensor::zeros(x.shape(), type, Device::cuda);
  dropout_forward(on_gpu(x, type), 0.3, key, y_gpu);
  const Tensor got = from_gpu(y_gpu);
  std::int64_t dropped = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const bool cpu_drops = y.data<double>()[i] == 0.0;
    ASSERT_EQ(got.data<double>()[i] == 0.0, cpu_drops) << "element " << i;
    dropped += cpu_drops;
  }
  EXPECT_GT(dropped, x.numel() / 5);
  EXPECT_LT(dropped, x.numel() * 2 / 5);
  EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);

  const Tensor dy = random_in(x.shape(), type, 15);
  Tensor dx = random_in(x.shape(), type, 16);
  Tensor dx_gpu = on_gpu(dx, type);
  dropout_backward(dy, 0.3, key, dx);
  dropout_backward(on_gpu(dy, type), 0.3, key, dx_gpu);
  EXPECT_CLOSE_TO_REFERENCE(dx_gpu, dx, type);
}

TEST_P(CudaElementwise, RotaryTurnsTheHeadsAndBack) {
  const ScalarType type = GetParam();
  constexpr std::int64_t kHeads = 3, kHeadDim = 16, kWidth = kHeads * kHeadDim + 8;
  const Tensor x = random_in({2, 9, kWidth}, type, 17);
  Tensor cpu = Tensor::zeros_like(x);
  cpu.copy_from(x);
  Tensor gpu = on_gpu(x, type);
  rotary_forward(cpu, kHeads, kHeadDim, 10000.0);
  rotary_forward(gpu, kHeads, kHeadDim, 10000.0);
  EXPECT_CLOSE_TO_REFERENCE(gpu, cpu, type);
  rotary_backward(cpu, kHeads, kHeadDim, 10000.0);
  rotary_backward(gpu, kHeads, kHeadDim, 10000.0);
  EXPECT_CLOSE_TO_REFERENCE(gpu, cpu, type);
}

TEST_P(CudaElementwise, PositionEmbeddingForwardAndBackward) {
  const ScalarType type = GetParam();
  constexpr std::int64_t kBatch = 3, kSeq = 11, kHidden = 40, kMaxSeq = 16;
  const Tensor table = random_in({kMaxSeq, kHidden}, type, 18);
  Tensor x = random_in({kBatch, kSeq, kHidden}, type, 19);
  Tensor x_gpu = on_gpu(x, type);
  position_embedding_forward(table, x);
  position_embedding_forward(on_gpu(table, type), x_gpu);
  EXPECT_CLOSE_TO_REFERENCE(x_gpu, x, type);

  const Tensor dx = random_in({kBatch, kSeq, kHidden}, type, 20);
  Tensor dtable = random_in({kMaxSeq, kHidden}, ScalarType::float32, 21);
  Tensor dtable_gpu = on_gpu(dtable, ScalarType::float32);
  position_embedding_backward(dx, dtable);
  position_embedding_backward(on_gpu(dx, type), dtable_gpu);
  EXPECT_CLOSE_TO_REFERENCE(dtable_gpu, dtable, ScalarType::float32);
}

// Repeated ids sum into one row; the sorted backward gives the same sums in every run.
TEST_P(CudaElementwise, EmbeddingForwardAndDeterministicBackward) {
  const ScalarType type = GetParam();
  constexpr std::int64_t kVocab = 50, kHidden = 48, kTokens = 77;
  Tensor ids = Tensor::zeros({kTokens}, ScalarType::int32);
  for (std::int64_t i = 0; i < kTokens; ++i) {
    ids.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * i * 7 + 3) % 23);
  }
  const Tensor table = random_in({kVocab, kHidden}, type, 22);
  Tensor out = Tensor::zeros({kTokens, kHidden}, ScalarType::float64);
  embedding_forward(ids, table, out);
  Tensor out_gpu = Tensor::zeros({kTokens, kHidden}, type, Device::cuda);
  const Tensor ids_gpu = ids.to(Device::cuda);
  embedding_forward(ids_gpu, on_gpu(table, type), out_gpu);
  EXPECT_CLOSE_TO_REFERENCE(out_gpu, out, type);

  const Tensor dout = random_in({kTokens, kHidden}, type, 23);
  Tensor dtable = random_in({kVocab, kHidden}, ScalarType::float32, 24);
  const Tensor start = dtable.to(Device::cpu);
  Tensor first = on_gpu(start, ScalarType::float32);
  Tensor second = on_gpu(start, ScalarType::float32);
  embedding_backward(ids, dout, dtable);
  embedding_backward(ids_gpu, on_gpu(dout, type), first);
  embedding_backward(ids_gpu, on_gpu(dout, type), second);
  EXPECT_CLOSE_TO_REFERENCE(first, dtable, ScalarType::float32);
  EXPECT_EQ(testing::max_relative_difference(from_gpu(first), from_gpu(second)), 0.0);
}

// A sequence-parallel rank's rows: more rows than one sequence, starting mid-sequence, so that
// positions repeat within the rank and the backward sums them.
TEST_P(CudaElementwise, PositionEmbeddingOfARanksRows) {
  const ScalarType type = GetParam();
  constexpr std::int64_t kSeq = 11, kRows = 25, kHidden = 40, kMaxSeq = 16;
  const Tensor table = random_in({kMaxSeq, kHidden}, type, 26);
  for (const std::int64_t first_token : {0, 7, 30}) {
    Tensor x = random_in({kRows, kHidden}, type, 27);
    Tensor x_gpu = on_gpu(x, type);
    position_embedding_forward_rows(table, x, kSeq, first_token);
    position_embedding_forward_rows(on_gpu(table, type), x_gpu, kSeq, first_token);
    EXPECT_CLOSE_TO_REFERENCE(x_gpu, x, type);

    const Tensor dx = random_in({kRows, kHidden}, type, 28);
    Tensor dtable = random_in({kMaxSeq, kHidden}, ScalarType::float32, 29);
    Tensor dtable_gpu = on_gpu(dtable, ScalarType::float32);
    position_embedding_backward_rows(dx, dtable, kSeq, first_token);
    position_embedding_backward_rows(on_gpu(dx, type), dtable_gpu, kSeq, first_token);
    EXPECT_CLOSE_TO_REFERENCE(dtable_gpu, dtable, ScalarType::float32);
  }
}

// Each tp rank's rows of the table: ids of other ranks give zero rows forward (written over what
// the buffer held) and touch nothing backward. The first rank's shard starts at 0 while the ids
// reach past it, which the sorted backward must still group.
TEST_P(CudaElementwise, VocabularyParallelEmbeddingOfEachShard) {
  const ScalarType type = GetParam();
  constexpr std::int64_t kVocab = 60, kShard = 20, kHidden = 48, kTokens = 77;
  Tensor ids = Tensor::zeros({kTokens}, ScalarType::int32);
  for (std::int64_t i = 0; i < kTokens; ++i) {
    ids.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * i * 7 + 3 * i + 5) % kVocab);
  }
  const Tensor ids_gpu = ids.to(Device::cuda);
  for (const std::int64_t start : {0, 20, 40}) {
    const Tensor shard = random_in({kShard, kHidden}, type, 30 + static_cast<std::uint32_t>(start));
    Tensor out = Tensor::zeros({kTokens, kHidden}, ScalarType::float64);
    vocab_parallel_embedding_forward(ids, shard, start, out);
    Tensor out_gpu = on_gpu(random_in({kTokens, kHidden}, type, 31), type);
    vocab_parallel_embedding_forward(ids_gpu, on_gpu(shard, type), start, out_gpu);
    EXPECT_CLOSE_TO_REFERENCE(out_gpu, out, type);

    const Tensor dout = random_in({kTokens, kHidden}, type, 32);
    Tensor dshard = random_in({kShard, kHidden}, ScalarType::float32, 33);
    Tensor first = on_gpu(dshard, ScalarType::float32);
    Tensor second = on_gpu(dshard, ScalarType::float32);
    vocab_parallel_embedding_backward(ids, dout, start, dshard);
    vocab_parallel_embedding_backward(ids_gpu, on_gpu(dout, type), start, first);
    vocab_parallel_embedding_backward(ids_gpu, on_gpu(dout, type), start, second);
    EXPECT_CLOSE_TO_REFERENCE(first, dshard, ScalarType::float32);
    EXPECT_EQ(testing::max_relative_difference(from_gpu(first), from_gpu(second)), 0.0);
  }
}

// The bias of a row-parallel layer, added after the tp sum; its gradient is a column sum that
// repeats bit for bit. Widths with and without 16-byte vectors.
TEST_P(CudaElementwise, SeparateBiasForwardAndBackward) {
  const ScalarType type = GetParam();
  constexpr std::int64_t kRows = 300;
  for (const std::int64_t features : {48, 41}) {
    const Tensor bias = random_in({features}, type, 34);
    Tensor y = random_in({kRows, features}, type, 35);
    Tensor y_gpu = on_gpu(y, type);
    bias_forward(y, bias);
    bias_forward(y_gpu, on_gpu(bias, type));
    EXPECT_CLOSE_TO_REFERENCE(y_gpu, y, type);

    const Tensor dy = random_in({kRows, features}, type, 36);
    Tensor dbias = random_in({features}, ScalarType::float32, 37);
    Tensor first = on_gpu(dbias, ScalarType::float32);
    Tensor second = on_gpu(dbias, ScalarType::float32);
    bias_backward(dy, dbias);
    bias_backward(on_gpu(dy, type), first);
    bias_backward(on_gpu(dy, type), second);
    EXPECT_CLOSE_TO_REFERENCE(first, dbias, ScalarType::float32);
    EXPECT_EQ(testing::max_relative_difference(from_gpu(first), from_gpu(second)), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaElementwise, ::testing::ValuesIn(testing::kCudaTypes),
                         testing::type_label);

class CudaConvert : public testing::CudaTest {};

// The GPU rounds float32 to bfloat16 exactly as the host conversion does (ties to even).
TEST_F(CudaConvert, ConvertRoundsToBfloat16AsTheHostDoes) {
  const Tensor values = testing::random_tensor({4099}, ScalarType::float32, 25, 100.0);
  Tensor host = Tensor::zeros(values.shape(), ScalarType::bfloat16);
  convert(values, host);
  Tensor device = Tensor::zeros(values.shape(), ScalarType::bfloat16, Device::cuda);
  convert(values.to(Device::cuda), device);
  const Tensor back = device.to(Device::cpu);
  for (std::int64_t i = 0; i < values.numel(); ++i) {
    ASSERT_EQ(back.data<BFloat16>()[i].bits, host.data<BFloat16>()[i].bits) << "element " << i;
  }
}

}  // namespace
}  // namespace strata::executor
