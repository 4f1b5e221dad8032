#include "strata/executor/model/all_gather_attention.h"

#include "strata/executor/check.h"
#include "strata/executor/ops/attention_block.h"
#include "visible_blocks.h"

namespace strata::executor {
namespace {

void resize(Tensor& tensor, const Shape& shape, const Tensor& like) {
  if (tensor.shape() != shape || tensor.scalar_type() != like.scalar_type()) {
    tensor = Tensor::zeros(shape, like.scalar_type(), like.device());
  }
}

// Gathers every cp rank's keys and values of qkv into buffers.gathered.
void gather_keys_values(const ContextParallelism& cp, const Tensor& qkv,
                        const AttentionShape& shape, AllGatherAttentionBuffers& buffers) {
  STRATA_CHECK(cp.active() && qkv.dim() == 3 && qkv.size(1) % 2 == 0,
               "all-gather attention over cp {} of qkv {}", cp.size(),
               shape_to_string(qkv.shape()));
  const Shape local{qkv.size(0), qkv.size(1), kv_width(shape)};
  resize(buffers.keys_values, local, qkv);
  resize(buffers.gathered, {cp.size(), local[0], local[1], local[2]}, qkv);
  extract_keys_values(qkv, shape, buffers.keys_values);
  cp.group->all_gather(buffers.keys_values, buffers.gathered);
}

// Calls visit(source, its keys and values, block) for every visible block, the sources in the
// ring's order (this rank's own first), so both variants merge the blocks in the same order.
template <class Visit>
void for_each_gathered_block(const ContextParallelism& cp, const AttentionShape& shape,
                             const Tensor& qkv, Tensor& gathered, Visit&& visit) {
  const Shape local{gathered.size(1), gathered.size(2), gathered.size(3)};
  const std::int64_t per_rank = shape_numel(local);
  for (std::int64_t step = 0; step < cp.size(); ++step) {
    const std::int64_t source = (cp.rank() + cp.size() - step) % cp.size();
    Tensor keys_values = gathered.view(source * per_rank, local);
    detail::for_each_visible_block(
        cp, shape, qkv.size(1), source,
        [&](const AttentionBlock& block) { visit(source, keys_values, block); });
  }
}

}  // namespace

void all_gather_attention_forward(const ContextParallelism& cp, const Tensor& qkv,
                                  const AttentionShape& shape, Tensor& out, Tensor& lse,
                                  AllGatherAttentionBuffers& buffers) {
  gather_keys_values(cp, qkv, shape, buffers);
  attention_blocks_begin(out, lse);
  for_each_gathered_block(
      cp, shape, qkv, buffers.gathered,
      [&](std::int64_t, const Tensor& keys_values, const AttentionBlock& block) {
        attention_block_forward(qkv, keys_values, block, shape, out, lse);
      });
}

void all_gather_attention_backward(const ContextParallelism& cp, const Tensor& dout,
                                   const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                   const AttentionShape& shape, Tensor& dqkv,
                                   AllGatherAttentionBuffers& buffers) {
  // Gathered again rather than kept from the forward: a layer holds only its own keys between
  // the passes, as under the ring.
  gather_keys_values(cp, qkv, shape, buffers);
  resize(buffers.gathered_grad, buffers.gathered.shape(), qkv);
  resize(buffers.keys_values_grad, buffers.keys_values.shape(), qkv);
  resize(buffers.output_dot, {qkv.size(0), shape.num_heads, qkv.size(1)}, qkv);
  buffers.gathered_grad.fill_zero();
  attention_output_dot(dout, out, shape, buffers.output_dot);
  const Shape local = buffers.keys_values.shape();
  const std::int64_t per_rank = shape_numel(local);
  for_each_gathered_block(
      cp, shape, qkv, buffers.gathered,
      [&](std::int64_t source, const Tensor& keys_values, const AttentionBlock& block) {
        Tensor keys_values_grad = buffers.gathered_grad.view(source * per_rank, local);
        attention_block_backward(dout, qkv, keys_values, lse, buffers.output_dot, block, shape,
                                 dqkv, keys_values_grad);
      });
  cp.group->reduce_scatter(buffers.gathered_grad, buffers.keys_values_grad);
  add_keys_values_gradient(buffers.keys_values_grad, shape, dqkv);
}

}  // namespace strata::executor
