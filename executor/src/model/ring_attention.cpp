#include "strata/executor/model/ring_attention.h"

#include "strata/executor/check.h"
#include "strata/executor/ops/attention_block.h"
#include "strata/executor/ops/residual.h"
#include "visible_blocks.h"

namespace strata::executor {
namespace {

// Message tags on the cp group: one per ring step and kind, so that no two transfers between
// the same pair of ranks in one pass can be confused.
enum class RingMessage { forward_keys = 0, backward_keys = 1, backward_gradients = 2 };
int tag_of(RingMessage kind, std::int64_t step) {
  return static_cast<int>(3 * step + static_cast<std::int64_t>(kind));
}

void size_buffers(const Tensor& qkv, const AttentionShape& shape, RingAttentionBuffers& buffers,
                  bool gradients) {
  const Shape kv_shape{qkv.size(0), qkv.size(1), kv_width(shape)};
  for (int i = 0; i < 2; ++i) {
    if (buffers.keys_values[i].shape() != kv_shape ||
        buffers.keys_values[i].scalar_type() != qkv.scalar_type()) {
      buffers.keys_values[i] = Tensor::zeros(kv_shape, qkv.scalar_type(), qkv.device());
    }
    if (gradients && (buffers.keys_values_grad[i].shape() != kv_shape ||
                      buffers.keys_values_grad[i].scalar_type() != qkv.scalar_type())) {
      buffers.keys_values_grad[i] = Tensor::zeros(kv_shape, qkv.scalar_type(), qkv.device());
      buffers.keys_values_grad_arriving = Tensor::zeros(kv_shape, qkv.scalar_type(), qkv.device());
    }
  }
  const Shape dot_shape{qkv.size(0), shape.num_heads, qkv.size(1)};
  if (gradients && (buffers.output_dot.shape() != dot_shape ||
                    buffers.output_dot.scalar_type() != qkv.scalar_type())) {
    buffers.output_dot = Tensor::zeros(dot_shape, qkv.scalar_type(), qkv.device());
  }
}

}  // namespace

void ring_attention_forward(const ContextParallelism& cp, const Tensor& qkv,
                            const AttentionShape& shape, Tensor& out, Tensor& lse,
                            RingAttentionBuffers& buffers) {
  STRATA_CHECK(cp.active() && qkv.dim() == 3 && qkv.size(1) % 2 == 0,
               "ring attention over cp {} of qkv {}", cp.size(), shape_to_string(qkv.shape()));
  Communicator& ring = *cp.group;
  const std::int64_t ranks = cp.size();
  const int next = static_cast<int>((cp.rank() + 1) % ranks);
  const int previous = static_cast<int>((cp.rank() + ranks - 1) % ranks);
  size_buffers(qkv, shape, buffers, false);
  extract_keys_values(qkv, shape, buffers.keys_values[0]);
  attention_blocks_begin(out, lse);
  for (std::int64_t step = 0; step < ranks; ++step) {
    Tensor& in_hand = buffers.keys_values[step % 2];
    Tensor& arriving = buffers.keys_values[(step + 1) % 2];
    CommunicationRequest receive, send;
    if (step + 1 < ranks) {
      receive = ring.receive_async(arriving, previous, tag_of(RingMessage::forward_keys, step));
      send = ring.send_async(in_hand, next, tag_of(RingMessage::forward_keys, step));
    }
    const std::int64_t source = (cp.rank() + ranks - step) % ranks;
    detail::for_each_visible_block(cp, shape, qkv.size(1), source,
                                   [&](const AttentionBlock& block) {
                                     attention_block_forward(qkv, in_hand, block, shape, out, lse);
                                   });
    send.wait();
    receive.wait();
  }
}

void ring_attention_backward(const ContextParallelism& cp, const Tensor& dout, const Tensor& qkv,
                             const Tensor& out, const Tensor& lse, const AttentionShape& shape,
                             Tensor& dqkv, RingAttentionBuffers& buffers) {
  STRATA_CHECK(cp.active() && qkv.dim() == 3 && qkv.size(1) % 2 == 0,
               "ring attention over cp {} of qkv {}", cp.size(), shape_to_string(qkv.shape()));
  Communicator& ring = *cp.group;
  const std::int64_t ranks = cp.size();
  const int next = static_cast<int>((cp.rank() + 1) % ranks);
  const int previous = static_cast<int>((cp.rank() + ranks - 1) % ranks);
  size_buffers(qkv, shape, buffers, true);
  extract_keys_values(qkv, shape, buffers.keys_values[0]);
  attention_output_dot(dout, out, shape, buffers.output_dot);
  // The gradient of each source's keys and values travels with them, summed along the way: a
  // rank adds its blocks' contribution into a fresh buffer while the sum of the ranks before it
  // arrives, adds the two, and passes the sum on while it computes the next step. After the last
  // step each rank receives its own gradient, complete. Only the additions wait on the ring.
  CommunicationRequest gradient_send, gradient_receive;
  for (std::int64_t step = 0; step < ranks; ++step) {
    Tensor& in_hand = buffers.keys_values[step % 2];
    CommunicationRequest receive, send;
    if (step + 1 < ranks) {
      receive = ring.receive_async(buffers.keys_values[(step + 1) % 2], previous,
                                   tag_of(RingMessage::backward_keys, step));
      send = ring.send_async(in_hand, next, tag_of(RingMessage::backward_keys, step));
    }
    Tensor& contribution = buffers.keys_values_grad[step % 2];
    contribution.fill_zero();
    const std::int64_t source = (cp.rank() + ranks - step) % ranks;
    detail::for_each_visible_block(
        cp, shape, qkv.size(1), source, [&](const AttentionBlock& block) {
          attention_block_backward(dout, qkv, in_hand, lse, buffers.output_dot, block, shape, dqkv,
                                   contribution);
        });
    if (step > 0) {
      gradient_receive.wait();
      residual_forward(contribution, buffers.keys_values_grad_arriving, contribution);
    }
    gradient_send.wait();  // the other contribution buffer, sent a step ago
    gradient_send =
        ring.send_async(contribution, next, tag_of(RingMessage::backward_gradients, step));
    gradient_receive = ring.receive_async(buffers.keys_values_grad_arriving, previous,
                                          tag_of(RingMessage::backward_gradients, step));
    send.wait();
    receive.wait();
  }
  gradient_receive.wait();
  gradient_send.wait();
  add_keys_values_gradient(buffers.keys_values_grad_arriving, shape, dqkv);
}

}  // namespace strata::executor
