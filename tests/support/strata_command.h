// Runs the strata binary as users do, for the CLI tests: exit code, stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace strata::testing {

struct CommandResult {
  int exit_code;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

inline CommandResult strata(const std::string& arguments) {
  // CTest runs test cases in parallel processes: give each its own directory.
  const std::filesystem::path directory =
      std::filesystem::path(::testing::TempDir()) / ("strata-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  const std::filesystem::path out = directory / "stdout", err = directory / "stderr";
  const std::string command = std::string(STRATA_BINARY) + " " + arguments + " > " + out.string() +
                              " 2> " + err.string() + " < /dev/null";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

inline std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace strata::testing
