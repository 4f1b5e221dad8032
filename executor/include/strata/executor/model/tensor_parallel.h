// What a model layer needs of its tensor-parallel group, and the two transitions of Megatron's
// parallel layers between token-sharded (or replicated) activations and the tensor-parallel
// region. Used by TransformerLayer and Transformer.
//
// Column-parallel linear (qkv, fc, gate, up, the LM head): every rank needs all tokens' inputs and
// produces its slice of the output features; its input gradient is a partial sum over ranks.
// Row-parallel linear (attention and MLP output): every rank holds a slice of the input features
// and produces a partial sum of the output. Between them, per tp group:
//
//                    gather_sequence (before a column-     reduce_sequence (after a row-parallel
//                    parallel layer; backward of a         layer; backward of a column-parallel
//                    row-parallel one)                     one)
//   without SP       identity (tokens are replicated)      all-reduce
//   sequence-        all-gather of the tokens               reduce-scatter to this rank's tokens
//   parallel (SP)
//
// Under sequence parallelism a rank holds the tokens [rank·n/tp, (rank+1)·n/tp) of the
// micro-batch's n = batch·seq tokens, flattened: norms, dropout and residuals run on them. (Our
// activations are batch-major, [batch, seq, hidden]; Megatron's sequence-major layout makes the
// same split a split of the sequence. Any contiguous token split serves, as every op between the
// transitions works token by token.)
#pragma once

#include <cstdint>
#include <functional>

#include "strata/executor/distributed/communicator.h"

namespace strata::executor {

struct TensorParallelism {
  Communicator* group = nullptr;  // the tp group; null on a single rank
  bool sequence_parallel = false;
  // The sub-group of `group` whose ranks hold the same replicated block (kv heads when tp exceeds
  // them), by replica count (ProcessGroups::tensor_parallel_replicas).
  std::function<Communicator&(std::int64_t replicas)> replicas;

  std::int64_t rank() const { return group ? group->rank() : 0; }
  std::int64_t size() const { return group ? group->size() : 1; }
  bool active() const { return size() > 1; }
  bool shards_tokens() const { return active() && sequence_parallel; }
  // This rank's tokens of a micro-batch of `tokens`: their count and the first one's index.
  std::int64_t local_tokens(std::int64_t tokens) const {
    return shards_tokens() ? tokens / size() : tokens;
  }
  std::int64_t first_local_token(std::int64_t tokens) const {
    return shards_tokens() ? rank() * (tokens / size()) : 0;
  }
};

// full [tokens, features] = every rank's `local` rows under SP; otherwise full = local (the same
// storage, or a copy).
void gather_sequence(const TensorParallelism& tp, const Tensor& local, Tensor& full);
// Sums `partial` [tokens, features] over the group: under SP into this rank's rows `local`;
// otherwise in place, `local` being `partial` itself or receiving a copy.
void reduce_sequence(const TensorParallelism& tp, Tensor& partial, Tensor& local);

}  // namespace strata::executor
