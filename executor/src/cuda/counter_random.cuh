// The counter-based generator of random/counter_random.h on the device: Philox-4x32-10 from
// Random123 with the same key (the seed) and counter (index, stream), so a kernel draws exactly
// the numbers the CPU draws — dropout masks match element for element across backends.
#pragma once

#include <Random123/philox.h>

#include <Random123/uniform.hpp>
#include <cstdint>

namespace strata::executor::cuda {

// random_uniform(RandomStream{seed, stream}, index) of counter_random.h: a uniform in (0, 1].
__device__ __forceinline__ double counter_uniform(std::uint64_t seed, std::uint64_t stream,
                                                  std::uint64_t index) {
  const r123::Philox4x32::key_type key = {
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type counter = {
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
       static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}};
  const r123::Philox4x32::ctr_type words = r123::Philox4x32()(counter, key);
  const std::uint64_t bits = (static_cast<std::uint64_t>(words[0]) << 32) | words[1];
  return r123::u01<double>(bits);
}

}  // namespace strata::executor::cuda
