#include "strata/executor/data/batch_sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "strata/executor/random/counter_random.h"
#include "strata/schemas/input_error.h"

namespace strata::executor {

BatchSampler::BatchSampler(const TokenFile& file, std::int64_t seq_length, std::int64_t vocab_size,
                           std::uint64_t seed, DataOrder order, std::int64_t global_batch)
    : file_(file),
      seq_length_(seq_length),
      seed_(seed),
      order_(order),
      global_batch_(global_batch) {
  const std::int64_t available = static_cast<std::int64_t>(file.tokens.size());
  if (available < seq_length + 1) {
    throw schemas::InputError(file.path.string(), "",
                              fmt::format("{} tokens are too few for one sample of {} + 1 tokens",
                                          available, seq_length));
  }
  if (order != DataOrder::random) {
    batches_per_epoch_ = (available - 1) / (global_batch * seq_length);
    if (batches_per_epoch_ == 0) {
      throw schemas::InputError(
          file.path.string(), "",
          fmt::format("{} tokens are too few for one global batch of {} × {} + 1 tokens in {} "
                      "order",
                      available, global_batch, seq_length,
                      schemas::name_of(order, kDataOrderNames)));
    }
  }
  const auto largest = std::max_element(file.tokens.begin(), file.tokens.end());
  if (*largest >= vocab_size) {
    throw schemas::InputError(
        file.path.string(), "",
        fmt::format("token {} at position {} is outside the model's vocabulary of {}", *largest,
                    largest - file.tokens.begin(), vocab_size));
  }
}

std::optional<std::int64_t> BatchSampler::epoch_of(std::int64_t step) const {
  if (order_ == DataOrder::random) return std::nullopt;
  return step / batches_per_epoch_;
}

std::int64_t BatchSampler::batch_of(std::int64_t step) const {
  const std::int64_t epoch = step / batches_per_epoch_;
  const std::int64_t position = step % batches_per_epoch_;
  if (order_ == DataOrder::sequential) return position;
  if (shuffled_epoch_ != epoch) {
    // Fisher–Yates driven by counter-based draws of (seed, epoch): the same order on every rank
    // and after a resume.
    shuffled_batches_.resize(static_cast<std::size_t>(batches_per_epoch_));
    std::iota(shuffled_batches_.begin(), shuffled_batches_.end(), std::int64_t{0});
    const RandomStream stream{seed_ ^ 0x5348554646ULL, static_cast<std::uint64_t>(epoch)};
    for (std::int64_t i = batches_per_epoch_ - 1; i > 0; --i) {
      const std::array<std::uint32_t, 4> words =
          random_words(stream, static_cast<std::uint64_t>(i));
      const std::uint64_t draw = (static_cast<std::uint64_t>(words[0]) << 32) | words[1];
      const auto j = static_cast<std::size_t>(draw % static_cast<std::uint64_t>(i + 1));
      std::swap(shuffled_batches_[static_cast<std::size_t>(i)], shuffled_batches_[j]);
    }
    shuffled_epoch_ = epoch;
  }
  return shuffled_batches_[static_cast<std::size_t>(position)];
}

std::int64_t BatchSampler::window_start(std::int64_t step, std::int64_t sample) const {
  if (order_ != DataOrder::random) {
    return batch_of(step) * global_batch_ * seq_length_ + sample * seq_length_;
  }
  // Stream = step; counter = sample: a fresh uniform start for every (step, sample).
  const std::int64_t positions = static_cast<std::int64_t>(file_.tokens.size()) - seq_length_;
  const std::array<std::uint32_t, 4> words = random_words(
      RandomStream{seed_, static_cast<std::uint64_t>(step)}, static_cast<std::uint64_t>(sample));
  const std::uint64_t draw = (static_cast<std::uint64_t>(words[0]) << 32) | words[1];
  return static_cast<std::int64_t>(draw % static_cast<std::uint64_t>(positions));
}

void BatchSampler::fill(std::int64_t step, std::int64_t first_sample, Tensor& inputs,
                        Tensor& targets) const {
  STRATA_CHECK(
      inputs.dim() == 2 && inputs.size(1) == seq_length_ && targets.shape() == inputs.shape(),
      "batch tensors {} and {} for seq {}", shape_to_string(inputs.shape()),
      shape_to_string(targets.shape()), seq_length_);
  std::int32_t* input = inputs.data<std::int32_t>();
  std::int32_t* target = targets.data<std::int32_t>();
  for (std::int64_t row = 0; row < inputs.size(0); ++row) {
    const std::int64_t start = window_start(step, first_sample + row);
    for (std::int64_t t = 0; t < seq_length_; ++t) {
      input[row * seq_length_ + t] = file_.tokens[static_cast<std::size_t>(start + t)];
      target[row * seq_length_ + t] = file_.tokens[static_cast<std::size_t>(start + t + 1)];
    }
  }
}

}  // namespace strata::executor
