// The fixture of the `mpirun -np W strata train` tests (tools/parallel_cli_test.cpp and
// tools/parallel_switch_cli_test.cpp): a micro GPT trained on the fixture tokens, the command line
// for it, a long dp-2 run started in the background, and the one-rank losses to compare with.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "strata_under_mpirun.h"

namespace strata::testing {

inline const std::string kMicroModel =
    std::string(STRATA_FIXTURES_DIR) + "/executor/gpt-micro.json";

// Each step's loss within 1e-5 (relative) of the one-rank run's at that step.
inline void expect_same_losses(const std::vector<nlohmann::json>& got,
                               const std::vector<nlohmann::json>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double loss = expected[i].at("loss").get<double>();
    EXPECT_NEAR(got[i].at("loss").get<double>(), loss, 1e-5 * std::abs(loss)) << "step " << i + 1;
  }
}

struct ParallelCli : strata::testing::MpiCliTest {
  ParallelCli() : MpiCliTest("parallel-cli") {}

  std::string train(const std::string& extra) const {
    return "train --model " + kMicroModel + " --data " + tokens +
           " --micro-batch 2 --global-batch 4 --seq-len 32 " + extra;
  }
  // A dp-2 run of 100,000 steps started in the background, returned (the launcher's pid) once it
  // has logged its first step; -1 if it logged none within two minutes.
  pid_t start_long_run(const std::string& extra, const std::filesystem::path& out,
                       const std::filesystem::path& err) const {
    const std::string command = std::string(STRATA_MPIEXEC) + " -np 2 --oversubscribe " +
                                STRATA_BINARY + " " + train("--dp 2 --steps 100000 " + extra) +
                                " > " + out.string() + " 2> " + err.string() + " < /dev/null";
    const pid_t launcher = ::fork();
    if (launcher == 0) {
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto started = std::chrono::steady_clock::now();
    while (slurp(out).find("/100000 | loss") == std::string::npos) {
      if (std::chrono::steady_clock::now() - started > std::chrono::seconds(120)) {
        ADD_FAILURE() << "no step logged: " << slurp(err);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return launcher;
  }
};

}  // namespace strata::testing
