#include "strata/executor/model/context_parallel.h"

#include <algorithm>

#include "strata/executor/check.h"
#include "strata/executor/ops/position_embedding.h"
#include "strata/executor/ops/rotary.h"

namespace strata::executor {
namespace {

// Rows [row, row + count) of x, a tensor of rows of equal width.
Tensor rows_of(const Tensor& x, std::int64_t rows, std::int64_t row, std::int64_t count) {
  const std::int64_t width = x.numel() / rows;
  return x.view(row * width, {count, width});
}

}  // namespace

std::int64_t ContextParallelism::position(std::int64_t j, std::int64_t local_seq) const {
  const std::int64_t chunk = local_seq / 2;
  if (!active()) return j;
  const std::int64_t half = j / chunk;
  return chunk_of(rank(), half) * chunk + j % chunk;
}

std::vector<TokenRun> ContextParallelism::token_runs(std::int64_t first_row, std::int64_t rows,
                                                     std::int64_t local_seq) const {
  std::vector<TokenRun> runs;
  const std::int64_t seq = local_seq * size();
  // Without cp a run ends only where a sequence does; with it, where a chunk does.
  const std::int64_t run_length = active() ? local_seq / 2 : local_seq;
  STRATA_CHECK(run_length > 0 && local_seq % run_length == 0,
               "a local sequence of {} tokens over cp {}", local_seq, size());
  for (std::int64_t row = first_row; row < first_row + rows;) {
    const std::int64_t b = row / local_seq;
    const std::int64_t j = row % local_seq;
    const std::int64_t count = std::min(run_length - j % run_length, first_row + rows - row);
    const std::int64_t at = position(j, local_seq);
    runs.push_back(TokenRun{row - first_row, count, b * seq + at, at});
    row += count;
  }
  return runs;
}

void ContextParallelism::take_local_tokens(const Tensor& whole, Tensor& local) const {
  STRATA_CHECK(whole.dim() == 2 && local.dim() == 2 && whole.size(0) == local.size(0) &&
                   whole.size(1) == local.size(1) * size() &&
                   whole.scalar_type() == local.scalar_type() && whole.device() == Device::cpu &&
                   local.device() == Device::cpu,
               "cp {}: local tokens {} of {}", size(), shape_to_string(local.shape()),
               shape_to_string(whole.shape()));
  const std::int64_t local_seq = local.size(1);
  const std::int64_t rows = local.numel();
  for (const TokenRun& run : token_runs(0, rows, local_seq)) {
    rows_of(local, rows, run.row, run.count)
        .copy_from(rows_of(whole, whole.numel(), run.token, run.count));
  }
}

namespace {

// Applies `dropout` (dropout_forward or dropout_backward) to rows of `in` into `out`, each run
// of consecutive tokens with the key of its first global token: the one mask one device draws.
template <class Dropout>
void dropout_by_token_runs(const ContextParallelism& cp, std::int64_t first_row,
                           std::int64_t local_seq, const Tensor& in, double probability,
                           const DropoutKey& key, Tensor& out, Dropout&& dropout) {
  const std::int64_t rows = in.size(0);
  if (!cp.active()) {
    DropoutKey shifted = key;
    shifted.first_token += first_row;
    dropout(in, probability, shifted, out);
    return;
  }
  for (const TokenRun& run : cp.token_runs(first_row, rows, local_seq)) {
    DropoutKey shifted = key;
    shifted.first_token += run.token;
    Tensor run_out = rows_of(out, rows, run.row, run.count);
    dropout(rows_of(in, rows, run.row, run.count), probability, shifted, run_out);
  }
}

}  // namespace

void dropout_forward_local(const ContextParallelism& cp, std::int64_t first_row,
                           std::int64_t local_seq, const Tensor& x, double probability,
                           const DropoutKey& key, Tensor& y) {
  dropout_by_token_runs(cp, first_row, local_seq, x, probability, key, y,
                        [](auto&&... arguments) { dropout_forward(arguments...); });
}

void dropout_backward_local(const ContextParallelism& cp, std::int64_t first_row,
                            std::int64_t local_seq, const Tensor& dy, double probability,
                            const DropoutKey& key, Tensor& dx) {
  dropout_by_token_runs(cp, first_row, local_seq, dy, probability, key, dx,
                        [](auto&&... arguments) { dropout_backward(arguments...); });
}

namespace {

// The rows of `run` at their positions rolled `shift` places left (Megatron-Core's MTP rolls its
// position ids with its token ids): position p + shift while that is in the sequence, then 0 (the
// zeros roll_tensor fills the end with), a row at a time. f(row, count, first position).
template <class Rows>
void for_each_shifted(const TokenRun& run, std::int64_t seq, std::int64_t shift, Rows&& f) {
  const std::int64_t kept = std::clamp<std::int64_t>(seq - shift - run.position, 0, run.count);
  if (kept > 0) f(run.row, kept, run.position + shift);
  for (std::int64_t i = kept; i < run.count; ++i) f(run.row + i, 1, 0);
}

}  // namespace

void position_embedding_forward_local(const ContextParallelism& cp, std::int64_t first_row,
                                      std::int64_t local_seq, const Tensor& table, Tensor& x,
                                      std::int64_t shift) {
  const std::int64_t rows = x.size(0);
  const std::int64_t hidden = x.size(1);
  if (shift == 0 && !cp.active() && first_row == 0 && rows % local_seq == 0) {
    // Whole sequences: the batch-shaped op (the one the CUDA backend has).
    Tensor sequences = x.reshaped({rows / local_seq, local_seq, hidden});
    position_embedding_forward(table, sequences);
    return;
  }
  const std::int64_t seq = local_seq * cp.size();
  for (const TokenRun& run : cp.token_runs(first_row, rows, local_seq)) {
    for_each_shifted(run, seq, shift,
                     [&](std::int64_t row, std::int64_t count, std::int64_t position) {
                       Tensor part = rows_of(x, rows, row, count);
                       position_embedding_forward_rows(table, part, seq, position);
                     });
  }
}

void position_embedding_backward_local(const ContextParallelism& cp, std::int64_t first_row,
                                       std::int64_t local_seq, const Tensor& dx, Tensor& dtable,
                                       std::int64_t shift) {
  const std::int64_t rows = dx.size(0);
  const std::int64_t hidden = dx.size(1);
  if (shift == 0 && !cp.active() && first_row == 0 && rows % local_seq == 0) {
    position_embedding_backward(dx.reshaped({rows / local_seq, local_seq, hidden}), dtable);
    return;
  }
  const std::int64_t seq = local_seq * cp.size();
  for (const TokenRun& run : cp.token_runs(first_row, rows, local_seq)) {
    for_each_shifted(
        run, seq, shift, [&](std::int64_t row, std::int64_t count, std::int64_t position) {
          position_embedding_backward_rows(rows_of(dx, rows, row, count), dtable, seq, position);
        });
  }
}

namespace {

template <class Rotate>
void rotate_local(const ContextParallelism& cp, Tensor& x, Rotate&& rotate) {
  if (!cp.active()) {
    rotate(x, 0);
    return;
  }
  const std::int64_t local_seq = x.size(1);
  const std::int64_t width = x.size(2);
  const std::int64_t rows = x.size(0) * local_seq;
  for (const TokenRun& run : cp.token_runs(0, rows, local_seq)) {
    Tensor part = x.view(run.row * width, {1, run.count, width});
    rotate(part, run.position);
  }
}

}  // namespace

void rotary_forward_local(const ContextParallelism& cp, Tensor& x, std::int64_t num_heads,
                          std::int64_t head_dim, double theta) {
  rotate_local(cp, x, [&](Tensor& part, std::int64_t first_position) {
    rotary_forward(part, num_heads, head_dim, theta, first_position);
  });
}

void rotary_backward_local(const ContextParallelism& cp, Tensor& dx, std::int64_t num_heads,
                           std::int64_t head_dim, double theta) {
  rotate_local(cp, dx, [&](Tensor& part, std::int64_t first_position) {
    rotary_backward(part, num_heads, head_dim, theta, first_position);
  });
}

std::vector<AttentionBlock> visible_attention_blocks(std::int64_t size, std::int64_t rank,
                                                     std::int64_t local_seq, std::int64_t source,
                                                     std::int64_t window) {
  STRATA_CHECK(
      size >= 1 && rank >= 0 && rank < size && source >= 0 && source < size && local_seq % 2 == 0,
      "attention blocks of rank {} of {} against {} over {} local tokens", rank, size, source,
      local_seq);
  // Rank r holds chunks r and 2·size − 1 − r (ContextParallelism::chunk_of).
  const auto chunk_of = [&](std::int64_t owner, std::int64_t half) {
    return half == 0 ? owner : 2 * size - 1 - owner;
  };
  const std::int64_t chunk = local_seq / 2;
  std::vector<AttentionBlock> blocks;
  for (std::int64_t query_half = 0; query_half < 2; ++query_half) {
    const std::int64_t query_chunk = chunk_of(rank, query_half);
    for (std::int64_t key_half = 0; key_half < 2; ++key_half) {
      const std::int64_t key_chunk = chunk_of(source, key_half);
      if (key_chunk > query_chunk) continue;
      // The nearest query/key pair of the two chunks is (distance − 1)·chunk + 1 apart: a window
      // shorter than that sees nothing of the key chunk, and the block is never computed.
      const std::int64_t nearest = (query_chunk - key_chunk - 1) * chunk + 1;
      if (window > 0 && key_chunk < query_chunk && nearest >= window) continue;
      blocks.push_back(
          AttentionBlock{query_half * chunk, key_half * chunk, chunk,
                         key_chunk == query_chunk ? BlockMask::causal : BlockMask::full,
                         (query_chunk - key_chunk) * chunk});
    }
  }
  return blocks;
}

}  // namespace strata::executor
