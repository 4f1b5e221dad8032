#include "output_check.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::tools {

void check_output_file(const std::filesystem::path& out, std::string_view flag) {
  if (std::filesystem::is_directory(out)) {
    throw schemas::InputError(std::string(flag), "",
                              fmt::format("{} is a directory", out.string()));
  }
  try {
    schemas::require_regular_output(out);
  } catch (const schemas::InputError& error) {
    throw schemas::InputError(std::string(flag), "",
                              fmt::format("{} {}", out.string(), error.rule()));
  }
  const std::filesystem::path probe =
      out.parent_path() / fmt::format(".{}.probe-{}", out.filename().string(), getpid());
  {
    std::ofstream file(probe);
    if (!file) {
      throw schemas::InputError(
          std::string(flag), "",
          fmt::format("cannot write {}: {}", out.string(),
                      out.has_parent_path() && !std::filesystem::exists(out.parent_path())
                          ? "its directory does not exist"
                          : "its directory is not writable"));
    }
  }
  std::filesystem::remove(probe);
}

}  // namespace strata::tools
