// STRATA_LAYOUT_CHECK: layout's internal-invariant check. A failure is a bug in the caller (a
// placement that cannot split a dimension, a rank outside its group), never bad user input, which
// schemas' validation refuses before a layout is computed. It throws std::logic_error, the base
// of the executor's InvariantError, naming the function, file and line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata::layout {

[[noreturn]] inline void fail_layout_check(const char* condition, const std::string& message,
                                           const char* function, const char* file, int line) {
  throw std::logic_error(
      fmt::format("{}: {} ({} failed at {}:{})", function, message, condition, file, line));
}

}  // namespace strata::layout

#define STRATA_LAYOUT_CHECK(condition, ...)                                                 \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      ::strata::layout::fail_layout_check(#condition, ::fmt::format(__VA_ARGS__), __func__, \
                                          __FILE__, __LINE__);                              \
    }                                                                                       \
  } while (false)
