// CUDA against the CPU for causal grouped-query attention: the float32 kernel and, in bfloat16,
// the tensor-core flash kernels (head dims 64 and 128) and the float32-arithmetic kernel for
// other head dims; sequences that are and are not multiples of the kernels' 64-row tiles, with
// and without GQA. Backward gradients accumulate onto random starting values.
#include <gtest/gtest.h>

#include "cuda_testing.h"
#include "strata/executor/ops/causal_attention.h"

namespace strata::executor {
namespace {

using testing::from_gpu;
using testing::on_gpu;
using testing::random_in;

struct AttentionCase {
  ScalarType type;
  std::int64_t batch, seq, heads, kv_heads, head_dim;
};

std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) {
  const AttentionCase& c = info.param;
  return fmt::format("{}_b{}_t{}_h{}_g{}_d{}", scalar_type_name(c.type), c.batch, c.seq, c.heads,
                     c.kv_heads, c.head_dim);
}

class CudaAttention : public testing::CudaTest,
                      public ::testing::WithParamInterface<AttentionCase> {};

TEST_P(CudaAttention, ForwardAndBackwardMatchTheCpu) {
  const AttentionCase c = GetParam();
  const AttentionShape shape{c.heads, c.kv_heads, c.head_dim};
  const Tensor qkv = random_in({c.batch, c.seq, shape.qkv_width()}, c.type, 1);
  Tensor out = Tensor::zeros({c.batch, c.seq, shape.output_width()}, ScalarType::float64);
  Tensor lse = Tensor::zeros({c.batch, c.heads, c.seq}, ScalarType::float64);
  causal_attention_forward(qkv, shape, out, lse);

  const Tensor qkv_gpu = on_gpu(qkv, c.type);
  Tensor out_gpu = Tensor::zeros(out.shape(), c.type, Device::cuda);
  Tensor lse_gpu = Tensor::zeros(lse.shape(), ScalarType::float32, Device::cuda);
  causal_attention_forward(qkv_gpu, shape, out_gpu, lse_gpu);
  EXPECT_CLOSE_TO_REFERENCE(out_gpu, out, c.type);
  EXPECT_CLOSE_TO_REFERENCE(lse_gpu, lse, ScalarType::float32);

  // The backward from the GPU's own output, as training uses it.
  const Tensor out_rounded = from_gpu(out_gpu);
  const Tensor dout = random_in(out.shape(), c.type, 2);
  // Small starting values: the gradients add onto them (+=) without bf16 rounding of large sums
  // hiding the gradients' own error.
  Tensor dqkv = random_in(qkv.shape(), c.type, 3, 0.01);
  Tensor dqkv_gpu = on_gpu(dqkv, c.type);
  causal_attention_backward(dout, qkv, out_rounded, lse, shape, dqkv);
  causal_attention_backward(on_gpu(dout, c.type), qkv_gpu, out_gpu, lse_gpu, shape, dqkv_gpu);
  // bf16 probabilities and dS feed the backward's products: twice the forward's allowance.
  const double tolerance = 2 * testing::tolerance_for(c.type);
  EXPECT_LE(testing::normalized_error(from_gpu(dqkv_gpu), dqkv), tolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention,
                         ::testing::Values(AttentionCase{ScalarType::float32, 2, 37, 4, 2, 32},
                                           AttentionCase{ScalarType::float32, 1, 130, 2, 2, 64},
                                           AttentionCase{ScalarType::bfloat16, 2, 37, 4, 2, 32},
                                           AttentionCase{ScalarType::bfloat16, 2, 100, 4, 2, 64},
                                           AttentionCase{ScalarType::bfloat16, 1, 256, 2, 2, 64},
                                           AttentionCase{ScalarType::bfloat16, 2, 100, 4, 1, 128},
                                           AttentionCase{ScalarType::bfloat16, 1, 192, 2, 2, 128},
                                           // Several query blocks and a tail for head_dim 64;
                                           // fewer queries than one MMA tile; four query heads
                                           // a kv head over many blocks (the backward's
                                           // prefetched query blocks cross heads).
                                           AttentionCase{ScalarType::bfloat16, 1, 200, 8, 2, 64},
                                           AttentionCase{ScalarType::bfloat16, 1, 5, 2, 1, 64},
                                           AttentionCase{ScalarType::bfloat16, 2, 300, 8, 2, 128}),
                         case_name);

}  // namespace
}  // namespace strata::executor
