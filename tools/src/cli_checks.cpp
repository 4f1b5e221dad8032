#include "cli_checks.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace strata::tools {
namespace {

// 1e+30 as 1e+30, 0.9 as 0.9, 16777216 as 16777216: never DBL_MAX's 309 digits.
std::string readable(double value) {
  if (std::isinf(value)) return value > 0 ? "infinity" : "-infinity";
  return fmt::format("{}", value);
}

std::string range_text(std::int64_t minimum, std::int64_t maximum) {
  if (maximum == std::numeric_limits<std::int64_t>::max())
    return fmt::format("at least {}", minimum);
  return fmt::format("from {} to {}", minimum, maximum);
}

}  // namespace

std::string shorten_value(const std::string& value, std::size_t limit) {
  if (value.size() <= limit) return value;
  return fmt::format("{}…({} characters)", value.substr(0, limit / 2), value.size());
}

std::string error_line(std::string_view message) {
  std::string line;
  std::string word;
  const auto flush = [&] {
    line += shorten_value(word, 160);
    word.clear();
  };
  for (const char c : message) {
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') {
      flush();
      line += ' ';
    } else {
      word += c;
    }
  }
  flush();
  return line;
}

CLI::Validator whole_number_from(std::int64_t minimum, std::int64_t maximum) {
  const std::string description = fmt::format("INT {}", range_text(minimum, maximum));
  return CLI::Validator(
      [minimum, maximum](std::string& text) -> std::string {
        std::int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, error] = std::from_chars(text.data(), end, value);
        if (text.empty() || stop != end) {
          return fmt::format("{} is not a whole number", shorten_value(text));
        }
        if (error == std::errc::result_out_of_range || value < minimum || value > maximum) {
          return fmt::format("{} is not a whole number {}", shorten_value(text),
                             range_text(minimum, maximum));
        }
        return {};
      },
      description);
}

CLI::Validator number_from(double minimum, double maximum, bool minimum_exclusive) {
  const std::string range =
      fmt::format("{} {}{}", minimum_exclusive ? "above" : "from", readable(minimum),
                  std::isinf(maximum) ? "" : fmt::format(" to {}", readable(maximum)));
  return CLI::Validator(
      [minimum, maximum, minimum_exclusive, range](std::string& text) -> std::string {
        char* stop = nullptr;
        const double value = std::strtod(text.c_str(), &stop);
        if (text.empty() || stop != text.c_str() + text.size()) {
          return fmt::format("{} is not a number", shorten_value(text));
        }
        if (!std::isfinite(value)) {
          return fmt::format("{} is not a finite number", shorten_value(text));
        }
        const bool low = minimum_exclusive ? !(value > minimum) : !(value >= minimum);
        if (low || !(value <= maximum)) {
          return fmt::format("{} is not a number {}", shorten_value(text), range);
        }
        return {};
      },
      fmt::format("NUMBER {}", range));
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, error] = std::from_chars(text.data(), end, value);
        if (text.empty() || stop != end || error == std::errc::result_out_of_range) {
          return fmt::format("{} is not a whole number from 0 to 18446744073709551615",
                             shorten_value(text));
        }
        return {};
      },
      "UINT64");
}

}  // namespace strata::tools
