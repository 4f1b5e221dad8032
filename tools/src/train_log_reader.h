// Reading back what `strata train` logged (train_log.h), text or --log-format json: each step's
// measured time beside the time the simulator predicted for it. Used by `strata report`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace strata::tools {

struct MeasuredStep {
  std::int64_t step = 0;
  double measured_s = 0;
  double predicted_s = 0;
};

// The step lines of the log in order; other lines (the header, evaluations, the summary, notes)
// are skipped. A step line that does not read, or a log without any, is a schemas::InputError
// naming the file and the line.
std::vector<MeasuredStep> read_train_log(const std::filesystem::path& path);

}  // namespace strata::tools
