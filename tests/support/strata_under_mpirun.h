// Runs the strata binary under mpirun as users do, for the MPI CLI tests (needs STRATA_MPIEXEC).
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "strata_command.h"

namespace strata::testing {

// The environment every MPI test runs in. CI runs as root in a container, where Open MPI starts
// only with both confirmations; ranks oversubscribe the cores, one OpenMP thread each; under the
// sanitize preset Open MPI's own allocations at exit are not ours to leak-check.
inline void use_mpi_test_environment() {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  ::setenv("OMP_NUM_THREADS", "1", 0);
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 0);
}

// The files mpirun's output goes to in a test's directory (tests that list it skip them).
inline constexpr const char* kMpirunOut = "mpirun.out";
inline constexpr const char* kMpirunErr = "mpirun.err";

// strata under mpirun with `ranks` processes on however many cores there are.
inline CommandResult strata_under_mpirun(int ranks, const std::string& arguments,
                                         const std::filesystem::path& directory) {
  const std::filesystem::path out = directory / kMpirunOut, err = directory / kMpirunErr;
  const std::string command = std::string(STRATA_MPIEXEC) + " -np " + std::to_string(ranks) +
                              " --oversubscribe " + STRATA_BINARY + " " + arguments + " > " +
                              out.string() + " 2> " + err.string() + " < /dev/null";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// The fixture of the mpirun CLI tests: each test case runs in a fresh directory of its own (named
// by `prefix`, the process and the case), removed afterwards, holding the GPL-3 text as a token
// file (`tokens`); the case is skipped where the text is not installed.
inline const std::string kTokenText = "/usr/share/common-licenses/GPL-3";

class MpiCliTest : public ::testing::Test {
 protected:
  explicit MpiCliTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    if (!std::filesystem::exists(kTokenText)) GTEST_SKIP() << kTokenText << " is not installed";
    use_mpi_test_environment();
    directory = std::filesystem::path(::testing::TempDir()) /
                (prefix_ + "-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(directory);
    std::filesystem::create_directories(directory);
    tokens = (directory / "gpl.bin").string();
    const CommandResult data = strata("data --text " + kTokenText + " --out " + tokens);
    ASSERT_EQ(data.exit_code, 0) << data.err;
  }
  void TearDown() override { std::filesystem::remove_all(directory); }
  CommandResult mpirun(int ranks, const std::string& arguments) const {
    return strata_under_mpirun(ranks, arguments, directory);
  }
  std::filesystem::path directory;
  std::string tokens;

 private:
  std::string prefix_;
};

// stderr lines that strata wrote (mpirun adds its own summary of a failed job).
inline std::vector<std::string> strata_lines(const std::string& text) {
  std::vector<std::string> found;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (line.starts_with("strata:")) found.push_back(line);
  }
  return found;
}

// The strata processes (mpirun's children, not mpirun or a shell) whose arguments contain
// `marker`, in increasing pid order.
inline std::vector<pid_t> strata_processes_with(const std::string& marker) {
  std::vector<pid_t> found;
  for (const std::filesystem::directory_entry& entry :
       std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string arguments = slurp(entry.path() / "cmdline");
    const std::string program = arguments.substr(0, arguments.find('\0'));
    if (program == STRATA_BINARY && arguments.find(marker) != std::string::npos) {
      found.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace strata::testing
