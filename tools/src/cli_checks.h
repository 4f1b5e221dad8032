// The checks of numeric command-line values, shared by every subcommand: a value must be a
// finite number (or a whole number) inside a stated range, and the message says so with readable
// numbers and the value shortened. CLI11's own range checks let NaN through (every comparison
// with NaN is false) and print the largest double as 309 digits; these do neither.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "strata/schemas/enum_names.h"

namespace strata::tools {

// Every spelling of an enum's table, for CLI::IsMember: the command line accepts exactly what the
// file formats do.
template <typename Enum, std::size_t N>
std::vector<std::string> choices_of(const std::array<schemas::EnumName<Enum>, N>& table) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.emplace_back(entry.name);
  return names;
}

// A whole number from `minimum` to `maximum`, written in decimal (no sign beyond a leading '-',
// no exponent, no fraction).
CLI::Validator whole_number_from(std::int64_t minimum, std::int64_t maximum);

// A finite number from `minimum` to `maximum` (above `minimum` when minimum_exclusive).
CLI::Validator number_from(double minimum, double maximum, bool minimum_exclusive = false);

// An unsigned 64-bit value, 0 to 2^64 − 1: a seed. "-1" and "18446744073709551616" are refused,
// not wrapped.
CLI::Validator seed_value();

// A value as it may appear in a message: longer than `limit` characters, its first characters
// and its length.
std::string shorten_value(const std::string& value, std::size_t limit = 48);

// A message as stderr gets it: one line, words longer than any path (a 100,000-digit number)
// shortened.
std::string error_line(std::string_view message);

}  // namespace strata::tools
