// An output file the command writes only at its end (a profile's cluster file, a trained model,
// a trace) is checked writable at its start: minutes or hours of work are not lost to a missing
// directory.
#pragma once

#include <filesystem>
#include <string_view>

namespace strata::tools {

// Refuses (schemas::InputError naming `flag`) an `out` that is a directory or whose directory
// does not exist or cannot be written, by creating and removing a file beside it; the file
// itself is written atomically later.
void check_output_file(const std::filesystem::path& out, std::string_view flag);

}  // namespace strata::tools
