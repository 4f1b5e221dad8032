#include "strata/executor/random/counter_random.h"

#include <Random123/philox.h>

#include <Eigen/Core>
#include <Random123/uniform.hpp>
#include <algorithm>
#include <numbers>

namespace strata::executor {

std::uint64_t stream_of_name(std::string_view name) {
  std::uint64_t hash = 14695981039346656037ull;
  for (char character : name) {
    hash ^= static_cast<unsigned char>(character);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::array<std::uint32_t, 4> random_words(const RandomStream& stream, std::uint64_t index) {
  // Key = the seed; counter = (stream, index): 2^64 streams of 2^64 counters each.
  const r123::Philox4x32::key_type key = {
      {static_cast<std::uint32_t>(stream.seed), static_cast<std::uint32_t>(stream.seed >> 32)}};
  const r123::Philox4x32::ctr_type counter = {
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
       static_cast<std::uint32_t>(stream.stream), static_cast<std::uint32_t>(stream.stream >> 32)}};
  const r123::Philox4x32::ctr_type words = r123::Philox4x32()(counter, key);
  return {words[0], words[1], words[2], words[3]};
}

double random_uniform(const RandomStream& stream, std::uint64_t index) {
  const std::array<std::uint32_t, 4> words = random_words(stream, index);
  const std::uint64_t bits = (static_cast<std::uint64_t>(words[0]) << 32) | words[1];
  return r123::u01<double>(bits);
}

void random_normal_block(const RandomStream& stream, std::uint64_t block, float* out) {
  // Pair p of the block is Box-Muller of words 2(p mod 2), 2(p mod 2) + 1 of counter
  // first + p / 2: its sine is element 2p, its cosine element 2p + 1 (Random123's boxmuller
  // order: x = r·sin(πu), y = r·cos(πu)).
  constexpr std::int64_t kPairs = kNormalBlock / 2;
  using Block = Eigen::Array<float, kPairs, 1>;
  Block angle, radius;
  const std::uint64_t first_counter = block * static_cast<std::uint64_t>(kNormalBlock / 4);
  for (std::int64_t c = 0; c < kPairs / 2; ++c) {
    const std::array<std::uint32_t, 4> words =
        random_words(stream, first_counter + static_cast<std::uint64_t>(c));
    angle[2 * c] = r123::uneg11<float>(words[0]);
    radius[2 * c] = r123::u01<float>(words[1]);  // in (0, 1]: the logarithm stays finite
    angle[2 * c + 1] = r123::uneg11<float>(words[2]);
    radius[2 * c + 1] = r123::u01<float>(words[3]);
  }
  const Block r = (-2.0f * radius.log()).sqrt();
  const Block turned = angle * std::numbers::pi_v<float>;
  const Block sine = turned.sin() * r;
  const Block cosine = turned.cos() * r;
  for (std::int64_t p = 0; p < kPairs; ++p) {
    out[2 * p] = sine[p];
    out[2 * p + 1] = cosine[p];
  }
}

float random_normal(const RandomStream& stream, std::uint64_t index) {
  std::array<float, kNormalBlock> block;
  random_normal_block(stream, index / kNormalBlock, block.data());
  return block[index % kNormalBlock];
}

void fill_random_normal(const RandomStream& stream, std::uint64_t first_index, std::int64_t count,
                        float scale, float* out) {
  std::array<float, kNormalBlock> block;
  std::int64_t i = 0;
  while (i < count) {
    const std::uint64_t index = first_index + static_cast<std::uint64_t>(i);
    const auto offset = static_cast<std::int64_t>(index % kNormalBlock);
    random_normal_block(stream, index / kNormalBlock, block.data());
    const std::int64_t taken = std::min(count - i, kNormalBlock - offset);
    for (std::int64_t j = 0; j < taken; ++j) out[i + j] = scale * block[offset + j];
    i += taken;
  }
}

}  // namespace strata::executor
