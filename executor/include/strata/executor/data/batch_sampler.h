// BatchSampler: deterministic training batches from a token file. Where sample i of step s starts
// is a function of (seed, s, i) alone, so what a sample sees does not depend on the micro-batch
// size or on how data-parallel ranks split the global batch, and a resumed run continues exactly.
//   random      each window of seq + 1 tokens starts at a position drawn from (seed, s, i);
//   sequential  llm.c's loader: global batch s is the B·T + 1 contiguous tokens from token
//               (s mod E)·B·T, sample i the window from there + i·T (B = global batch, T = seq,
//               E = ⌊(tokens − 1) / (B·T)⌋ batches per epoch: the rest of the file is skipped, as
//               llm.c starts over when fewer than B·T + 1 tokens remain);
//   shuffled    the same batches, each epoch in an order drawn from (seed, epoch).
// Used by the training loop.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "strata/executor/data/token_file.h"
#include "strata/executor/tensor/tensor.h"
#include "strata/schemas/enum_names.h"

namespace strata::executor {

enum class DataOrder { random, sequential, shuffled };
inline constexpr std::array<schemas::EnumName<DataOrder>, 3> kDataOrderNames{
    {{DataOrder::random, "random"},
     {DataOrder::sequential, "sequential"},
     {DataOrder::shuffled, "shuffled"}}};

class BatchSampler {
 public:
  // Refuses (InputError naming the file) a file with fewer than seq + 1 tokens (sequential
  // orders: than one global batch of B·T + 1) and a token outside the model's vocabulary.
  BatchSampler(const TokenFile& file, std::int64_t seq_length, std::int64_t vocab_size,
               std::uint64_t seed, DataOrder order = DataOrder::random,
               std::int64_t global_batch = 1);

  // A resumed run draws with the checkpoint's seed.
  void set_seed(std::uint64_t seed) {
    seed_ = seed;
    shuffled_epoch_.reset();
  }
  // Where sample `sample` of step `step` (0-based) starts in the file.
  std::int64_t window_start(std::int64_t step, std::int64_t sample) const;
  // Global batches in one pass over the file (sequential orders; random: none).
  std::optional<std::int64_t> batches_per_epoch() const {
    return order_ == DataOrder::random ? std::nullopt : std::optional(batches_per_epoch_);
  }
  // The pass over the file step `step` belongs to (sequential orders), counted from 0.
  std::optional<std::int64_t> epoch_of(std::int64_t step) const;
  // Fills inputs and targets (int32 [rows, seq]) with samples first_sample .. first_sample+rows−1
  // of `step`; targets are the inputs shifted by one token.
  void fill(std::int64_t step, std::int64_t first_sample, Tensor& inputs, Tensor& targets) const;

 private:
  // The batch of the epoch that step `step` reads (sequential orders).
  std::int64_t batch_of(std::int64_t step) const;

  const TokenFile& file_;
  std::int64_t seq_length_;
  std::uint64_t seed_;
  DataOrder order_;
  std::int64_t global_batch_;
  std::int64_t batches_per_epoch_ = 0;  // sequential orders
  // The shuffled order of the last epoch asked for (one epoch at a time in a run).
  mutable std::optional<std::int64_t> shuffled_epoch_;
  mutable std::vector<std::int64_t> shuffled_batches_;
};

}  // namespace strata::executor
