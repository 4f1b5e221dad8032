// The counter-based normals that initialise parameters: the bulk fill equals the element-wise
// definition from any starting index, each lane is Box-Muller of its own two Philox words, and the
// numbers have a standard normal's moments.
#include "strata/executor/random/counter_random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace strata::executor {
namespace {

const RandomStream kStream{1234, stream_of_name("layers.0.mlp.fc.weight")};

TEST(CounterRandom, BulkFillEqualsElementwiseFromAnyStartAndLength) {
  // Starts and lengths that cut a counter's four lanes in every way.
  for (std::uint64_t first : {0ull, 1ull, 2ull, 3ull, 5ull, 4097ull}) {
    for (std::int64_t count : {1, 2, 3, 4, 7, 33}) {
      std::vector<float> filled(static_cast<std::size_t>(count));
      fill_random_normal(kStream, first, count, 0.02f, filled.data());
      for (std::int64_t i = 0; i < count; ++i) {
        EXPECT_EQ(filled[static_cast<std::size_t>(i)],
                  0.02f * random_normal(kStream, first + static_cast<std::uint64_t>(i)))
            << "first " << first << " element " << i;
      }
    }
  }
}

TEST(CounterRandom, EachLaneIsBoxMullerOfItsCountersWords) {
  // Recomputed in double precision from the raw words: lanes 0-1 from words 0-1, 2-3 from 2-3.
  for (std::uint64_t counter : {0ull, 1ull, 99ull}) {
    const std::array<std::uint32_t, 4> words = random_words(kStream, counter);
    for (std::uint64_t lane = 0; lane < 4; ++lane) {
      const std::uint32_t angle_word = words[lane / 2 * 2];
      const std::uint32_t radius_word = words[lane / 2 * 2 + 1];
      // Random123's conventions: angle uniform in [-1, 1] (× π), radius from a uniform in (0, 1].
      const double angle =
          std::numbers::pi * (static_cast<std::int32_t>(angle_word) * 0x1p-31 + 0x1p-32);
      const double radius = std::sqrt(-2.0 * std::log(radius_word * 0x1p-32 + 0x1p-33));
      const double expected = lane % 2 == 0 ? radius * std::sin(angle) : radius * std::cos(angle);
      EXPECT_NEAR(random_normal(kStream, counter * 4 + lane), expected,
                  1e-5 * (1.0 + std::abs(expected)))
          << "counter " << counter << " lane " << lane;
    }
  }
}

TEST(CounterRandom, NormalsHaveAStandardNormalsMoments) {
  constexpr std::int64_t kCount = 1 << 20;
  std::vector<float> values(kCount);
  fill_random_normal(kStream, 3, kCount, 1.0f, values.data());
  double sum = 0.0;
  double squares = 0.0;
  double fourth = 0.0;
  std::int64_t within_one = 0;
  for (float value : values) {
    sum += value;
    squares += static_cast<double>(value) * value;
    fourth += std::pow(static_cast<double>(value), 4);
    within_one += std::abs(value) < 1.0f ? 1 : 0;
  }
  const double n = static_cast<double>(kCount);
  // Five standard errors each: mean 1/√n, variance √(2/n), fourth moment √(96/n).
  EXPECT_NEAR(sum / n, 0.0, 5.0 / std::sqrt(n));
  EXPECT_NEAR(squares / n, 1.0, 5.0 * std::sqrt(2.0 / n));
  EXPECT_NEAR(fourth / n, 3.0, 5.0 * std::sqrt(96.0 / n));
  EXPECT_NEAR(static_cast<double>(within_one) / n, 0.682689, 5.0 * std::sqrt(0.2166 / n));
}

TEST(CounterRandom, StreamsAndSeedsGiveDifferentNumbers) {
  const RandomStream other_stream{1234, stream_of_name("layers.0.mlp.output.weight")};
  const RandomStream other_seed{1235, kStream.stream};
  int equal = 0;
  for (std::uint64_t i = 0; i < 64; ++i) {
    equal += random_normal(kStream, i) == random_normal(other_stream, i) ? 1 : 0;
    equal += random_normal(kStream, i) == random_normal(other_seed, i) ? 1 : 0;
  }
  EXPECT_EQ(equal, 0);
}

}  // namespace
}  // namespace strata::executor
