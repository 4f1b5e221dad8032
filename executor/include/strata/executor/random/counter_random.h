// Counter-based random numbers (Philox-4x32-10, from Debian's Random123): every number is a pure
// function of (seed, stream, index), with no generator state to carry or replay. Used by parameter
// initialisation (stream = hash of the parameter's name, index = global element index), dropout
// and the data sampler.
//
// Why: part 2 shards every parameter over tp/pp ranks. A rank creates exactly its shard by asking
// for the global indices it owns, element for element equal to the single-device tensor, without
// materialising the whole tensor (ATorch records init on the meta device for the same reason).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace strata::executor {

// A stream of random numbers inside one seed: e.g. one parameter, or (step, layer, site) of
// dropout.
struct RandomStream {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
};

// FNV-1a 64 of a name: stable across platforms and releases (std::hash is not).
std::uint64_t stream_of_name(std::string_view name);

// Four independent 32-bit words for counter `index` of `stream`.
std::array<std::uint32_t, 4> random_words(const RandomStream& stream, std::uint64_t index);
// A uniform in (0, 1] with 53 random bits, from counter `index`.
double random_uniform(const RandomStream& stream, std::uint64_t index);
// A standard normal for element `index` (Box-Muller on counter `index`'s first two words).
double random_normal(const RandomStream& stream, std::uint64_t index);

}  // namespace strata::executor
