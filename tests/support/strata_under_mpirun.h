// Runs the strata binary under mpirun as users do, for the MPI CLI tests (needs STRATA_MPIEXEC).
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
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
