// STRATA_CHECK: the executor's one internal-invariant check (shapes, dtypes, devices between ops).
// Used by every op and by the model; a failure names the function, file and line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata::executor {

// A broken invariant inside the executor (an op called with mismatched shapes, say): a bug in the
// caller, not bad user input, which is a schemas::InputError.
class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] inline void fail_check(const char* condition, const std::string& message,
                                    const char* function, const char* file, int line) {
  throw InvariantError(
      fmt::format("{}: {} ({} failed at {}:{})", function, message, condition, file, line));
}

}  // namespace strata::executor

#define STRATA_CHECK(condition, ...)                                                             \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      ::strata::executor::fail_check(#condition, ::fmt::format(__VA_ARGS__), __func__, __FILE__, \
                                     __LINE__);                                                  \
    }                                                                                            \
  } while (false)
