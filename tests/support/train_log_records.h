// The per-step records of `strata train --log-format json` output: one JSON object per line, the
// step records being those with a "step" field (the summary line has none). For the CLI tests that
// compare a run's steps with another's, and that comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "strata_command.h"

namespace strata::testing {

inline std::vector<nlohmann::json> step_records(const std::string& out) {
  std::vector<nlohmann::json> records;
  std::istringstream stream(out);
  for (std::string line; std::getline(stream, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (record.contains("step")) records.push_back(record);
  }
  return records;
}

// `run` succeeded and logged `expected`'s steps from `first` on: each loss and gradient norm
// within 1e-5 (relative) of the run it is held to. `layout` names the run in failures.
inline void expect_same_steps(const std::vector<nlohmann::json>& expected, const CommandResult& run,
                              std::size_t first, const std::string& layout) {
  ASSERT_EQ(run.exit_code, 0) << layout << ": " << run.err;
  const std::vector<nlohmann::json> got = step_records(run.out);
  ASSERT_EQ(got.size(), expected.size() - first) << layout << ": " << run.out;
  for (std::size_t i = 0; i < got.size(); ++i) {
    for (const char* field : {"loss", "gradient_norm"}) {
      const double want = expected[first + i].at(field).get<double>();
      EXPECT_NEAR(got[i].at(field).get<double>(), want, 1e-5 * std::abs(want))
          << layout << ", step " << first + i + 1 << ", " << field;
    }
  }
}

}  // namespace strata::testing
