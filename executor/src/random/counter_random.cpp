#include "strata/executor/random/counter_random.h"

#include <Random123/philox.h>

#include <Random123/boxmuller.hpp>
#include <Random123/uniform.hpp>

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

double random_normal(const RandomStream& stream, std::uint64_t index) {
  const std::array<std::uint32_t, 4> words = random_words(stream, index);
  const std::uint64_t first = (static_cast<std::uint64_t>(words[0]) << 32) | words[1];
  const std::uint64_t second = (static_cast<std::uint64_t>(words[2]) << 32) | words[3];
  return r123::boxmuller(first, second).x;
}

}  // namespace strata::executor
