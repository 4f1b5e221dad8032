// Paths the tests read from: the source tree's fixtures and the built strata binary.
#pragma once

#include <filesystem>
#include <string>

namespace strata::testing {

inline std::filesystem::path fixtures_dir() { return STRATA_FIXTURES_DIR; }
inline std::filesystem::path fixture(const std::string& relative) {
  return fixtures_dir() / relative;
}
inline std::filesystem::path source_dir() { return STRATA_SOURCE_DIR; }

}  // namespace strata::testing
