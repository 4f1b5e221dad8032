// The per-step records of `strata train --log-format json` output: one JSON object per line, the
// step records being those with a "step" field (the summary line has none). For the CLI tests that
// compare a run's steps with another's.
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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

}  // namespace strata::testing
