#include "strata/schemas/closest_name.h"

#include <gtest/gtest.h>

#include <array>

namespace strata::schemas {
namespace {

constexpr std::array<std::string_view, 5> kKeys{"hidden_size", "num_layers", "gpu", "tp", "flops"};

TEST(ClosestName, SuggestsTyposAndTranspositions) {
  EXPECT_EQ(closest_name("hiden_size", kKeys), "hidden_size");   // deletion
  EXPECT_EQ(closest_name("num_lyaers", kKeys), "num_layers");    // swap of neighbours
  EXPECT_EQ(closest_name("gpus", kKeys), "gpu");                 // insertion
  EXPECT_EQ(closest_name("Hidden_Size", kKeys), "hidden_size");  // case only
}

TEST(ClosestName, StaysQuietWhenNothingIsClose) {
  EXPECT_FALSE(closest_name("optimizer", kKeys));
  EXPECT_FALSE(closest_name("ep", kKeys)) << "one letter off a two-letter name is not a typo";
  EXPECT_FALSE(closest_name("flopsandmore", kKeys));
}

}  // namespace
}  // namespace strata::schemas
