// BatchSampler: deterministic training batches from a token file. Sample i of step s is the window
// of seq + 1 tokens starting at a position drawn from (seed, s, i) alone, so what a sample sees
// does not depend on the micro-batch size or, in part 2, on how data-parallel ranks split the
// global batch. Used by the training loop.
#pragma once

#include <cstdint>

#include "strata/executor/data/token_file.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

class BatchSampler {
 public:
  // Refuses (InputError naming the file) a file with fewer than seq + 1 tokens and a token outside
  // the model's vocabulary.
  BatchSampler(const TokenFile& file, std::int64_t seq_length, std::int64_t vocab_size,
               std::uint64_t seed);

  // A resumed run draws with the checkpoint's seed.
  void set_seed(std::uint64_t seed) { seed_ = seed; }
  // Where sample `sample` of step `step` starts in the file.
  std::int64_t window_start(std::int64_t step, std::int64_t sample) const;
  // Fills inputs and targets (int32 [rows, seq]) with samples first_sample .. first_sample+rows−1
  // of `step`; targets are the inputs shifted by one token.
  void fill(std::int64_t step, std::int64_t first_sample, Tensor& inputs, Tensor& targets) const;

 private:
  const TokenFile& file_;
  std::int64_t seq_length_;
  std::uint64_t seed_;
};

}  // namespace strata::executor
