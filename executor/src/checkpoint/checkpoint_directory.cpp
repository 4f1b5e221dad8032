#include "strata/executor/checkpoint/checkpoint_directory.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <regex>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::executor {

namespace fs = std::filesystem;

std::string checkpoint_directory_name(std::int64_t step) {
  return fmt::format("step_{:08d}", step);
}

fs::path temporary_checkpoint_path(const fs::path& directory, std::int64_t step, long writer_pid) {
  return directory / fmt::format(".{}.tmp.{}", checkpoint_directory_name(step), writer_pid);
}

fs::path create_temporary_checkpoint(const fs::path& directory, std::int64_t step,
                                     long writer_pid) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    throw schemas::InputError(directory.string(), "", "cannot create: " + error.message());
  }
  const fs::path temporary = temporary_checkpoint_path(directory, step, writer_pid);
  remove_abandoned_checkpoints(directory);
  fs::remove_all(temporary);
  fs::create_directory(temporary);
  return temporary;
}

fs::path commit_checkpoint(const fs::path& directory, const fs::path& temporary, std::int64_t step,
                           const std::string& state_json) {
  schemas::write_file_atomically(temporary / "state.json", state_json);
  const fs::path final_path = directory / checkpoint_directory_name(step);
  std::error_code error;
  fs::remove_all(final_path);
  fs::rename(temporary, final_path, error);
  if (error) {
    fs::remove_all(temporary);
    throw schemas::InputError(final_path.string(), "",
                              "cannot rename into place: " + error.message());
  }
  return final_path;
}

void remove_abandoned_checkpoints(const fs::path& directory) {
  static const std::regex kTemporary(R"(\.step_[0-9]{8,}\.tmp\.([0-9]+))");
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, error)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, match, kTemporary)) continue;
    // A writer's name holds its process id; one that no process can have (0, or too many digits
    // for a pid_t) was not written by strata and is left alone.
    const std::string digits = match[1].str();
    pid_t pid = 0;
    const auto [end, parsed] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (parsed != std::errc() || end != digits.data() + digits.size() || pid <= 0) continue;
    // kill(pid, 0) fails with ESRCH when no such process exists: its writer died mid-write.
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) {
      fs::remove_all(entry.path(), error);
    }
  }
}

std::vector<std::pair<std::int64_t, fs::path>> checkpoints_in(const fs::path& directory) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  if (!fs::is_directory(directory)) return found;
  // Eight digits or more: step 100,000,000 is step_100000000, which sorts after step_99999999 by
  // its number, not its name.
  static const std::regex kName("step_([0-9]{8,18})");
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    std::smatch match;
    if (!entry.is_directory() || !std::regex_match(name, match, kName)) continue;
    found.emplace_back(std::stoll(match[1].str()), entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::optional<fs::path> latest_checkpoint(const fs::path& directory) {
  const std::vector<std::pair<std::int64_t, fs::path>> found = checkpoints_in(directory);
  if (found.empty()) return std::nullopt;
  return found.back().second;
}

}  // namespace strata::executor
