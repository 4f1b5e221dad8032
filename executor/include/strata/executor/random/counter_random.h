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
// A standard normal for element `index`: lane index mod 4 of counter index / 4, whose four words
// feed two single-precision Box-Muller transforms (words 0-1 → lanes 0-1, words 2-3 → lanes 2-3).
// Normals are made kNormalBlock at a time, the transforms as Eigen array expressions over the
// whole block (vectorised log, sin, cos): one Philox call serves four elements and the block's
// transcendentals run 8 to a vector instruction — GPT-2 124M's 124M initial values take about a
// quarter of a second on 2 cores, not the 4.5 s of a double Box-Muller per element. A block is
// always computed whole, so an element's value does not depend on which range asked for it.
inline constexpr std::int64_t kNormalBlock = 1024;
// Normals kNormalBlock·block .. kNormalBlock·(block + 1) − 1 of `stream` into out[0 .. 1023].
void random_normal_block(const RandomStream& stream, std::uint64_t block, float* out);
// One element of that sequence (computes its block: for tests and spot values, not bulk use).
float random_normal(const RandomStream& stream, std::uint64_t index);
// scale · random_normal(stream, first_index + i) into out[i] for i in [0, count).
void fill_random_normal(const RandomStream& stream, std::uint64_t first_index, std::int64_t count,
                        float scale, float* out);

}  // namespace strata::executor
