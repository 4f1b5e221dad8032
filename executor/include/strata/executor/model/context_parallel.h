// ContextParallelism: a rank's share of every sequence under context parallelism (cp), and the
// position-keyed ops applied to that share. Used by Transformer, TransformerLayer and the
// pipeline runtime (which hands each rank its tokens).
//
// The causal split is load-balanced (Megatron-LM's and Llama 3's): each sequence of seq tokens is
// cut into 2·cp chunks of c = seq / (2·cp) tokens and rank r holds chunks r and 2cp−1−r, in that
// order, as its local sequence of seq / cp tokens — so every rank's queries see the same number of
// keys in total. Everything that works token by token (norms, projections, the MLP, the loss) runs
// on the local tokens unchanged; what depends on a token's place in the sequence uses its global
// position: the learned position embedding, RoPE, dropout's mask (keyed by the global token index,
// so cp ranks drop exactly what one device drops) and causal attention (ring_attention.h or
// all_gather_attention.h, as the plan's cp_comm says).
//
// Local rows are batch-major, [batch, seq / cp] flattened, as on one device; a tp rank under
// sequence parallelism holds a contiguous range of them.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/executor/ops/attention_block.h"
#include "strata/executor/ops/dropout.h"
#include "strata/executor/tensor/tensor.h"
#include "strata/schemas/plan.h"

namespace strata::executor {

// Local rows that are consecutive tokens of one sequence.
struct TokenRun {
  std::int64_t row = 0;    // first local row, counted from the first row asked for
  std::int64_t count = 0;  // rows in the run
  std::int64_t token = 0;  // global index of its first token in the micro-batch: b·seq + position
  std::int64_t position = 0;  // its first token's position in its sequence
};

struct ContextParallelism {
  Communicator* group = nullptr;  // the cp group; null on a single rank
  // How attention meets the other ranks' keys and values: around the ring, or all-gathered.
  schemas::ContextParallelComm comm = schemas::ContextParallelComm::ring;

  std::int64_t rank() const { return group ? group->rank() : 0; }
  std::int64_t size() const { return group ? group->size() : 1; }
  bool active() const { return size() > 1; }
  // The chunk (of 2·size()) that `rank`'s local half `half` (0 or 1) is.
  std::int64_t chunk_of(std::int64_t rank, std::int64_t half) const {
    return half == 0 ? rank : 2 * size() - 1 - rank;
  }
  // The global position of local position j of a local sequence of local_seq tokens.
  std::int64_t position(std::int64_t j, std::int64_t local_seq) const;
  // Local rows [first_row, first_row + rows) of a micro-batch whose local sequences hold
  // local_seq tokens, as runs of consecutive tokens (a run never crosses a chunk).
  std::vector<TokenRun> token_runs(std::int64_t first_row, std::int64_t rows,
                                   std::int64_t local_seq) const;
  // local [batch, seq / cp] = this rank's chunks of whole [batch, seq] (host tensors of one type).
  void take_local_tokens(const Tensor& whole, Tensor& local) const;
};

// The position-keyed ops on a rank's rows [first_row, first_row + rows of x) of a micro-batch of
// local sequences of local_seq tokens (first_row: a sequence-parallel rank's first token).

// y = dropout(x), each element's mask keyed by its global token (key.first_token: the
// micro-batch's first token in the step).
void dropout_forward_local(const ContextParallelism& cp, std::int64_t first_row,
                           std::int64_t local_seq, const Tensor& x, double probability,
                           const DropoutKey& key, Tensor& y);
void dropout_backward_local(const ContextParallelism& cp, std::int64_t first_row,
                            std::int64_t local_seq, const Tensor& dy, double probability,
                            const DropoutKey& key, Tensor& dx);

// x [rows, hidden] += the position embedding of each row's global position (and its backward);
// with `shift`, of that position rolled shift places left, 0 past the sequence's end (an MTP
// module's embedding, Megatron-Core's rolled position ids).
void position_embedding_forward_local(const ContextParallelism& cp, std::int64_t first_row,
                                      std::int64_t local_seq, const Tensor& table, Tensor& x,
                                      std::int64_t shift = 0);
void position_embedding_backward_local(const ContextParallelism& cp, std::int64_t first_row,
                                       std::int64_t local_seq, const Tensor& dx, Tensor& dtable,
                                       std::int64_t shift = 0);

// RoPE on every local token of x [batch, local_seq, width] (the fused qkv), at global positions.
void rotary_forward_local(const ContextParallelism& cp, Tensor& x, std::int64_t num_heads,
                          std::int64_t head_dim, double theta);
void rotary_backward_local(const ContextParallelism& cp, Tensor& dx, std::int64_t num_heads,
                           std::int64_t head_dim, double theta);

// The blocks of causal attention that `rank` of a cp group of `size` computes for its local
// sequence of local_seq tokens against the keys of `source`'s chunks: query chunk q meets key
// chunks k < q whole, k = q causally (the diagonal) and k > q not at all. With the load-balanced
// split every rank computes the same number of blocks. Under a sliding window of `window` keys
// (0: none) the blocks whose nearest pair is a window or more apart are left out. Both cp
// attention variants walk them (and the profiler times them).
std::vector<AttentionBlock> visible_attention_blocks(std::int64_t size, std::int64_t rank,
                                                     std::int64_t local_seq, std::int64_t source,
                                                     std::int64_t window = 0);

}  // namespace strata::executor
