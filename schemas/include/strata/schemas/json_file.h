// Reading JSON text strictly (syntax errors with line and column, duplicate keys refused) and
// writing files atomically. Used by every loader in schemas/ and every writer in tools/.
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace strata::schemas {

// Parses `text`; `source` names it in errors ("plan.json: line 3, column 7: invalid JSON: ...").
// Duplicate keys in one object are an error, since JSON parsers disagree on which one wins.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// Reads and parses a file; a missing or unreadable file is an InputError naming it.
nlohmann::json read_json_file(const std::filesystem::path& path);
std::string read_text_file(const std::filesystem::path& path);

// Refuses (InputError naming `path`) an existing `path` that is not a regular file: a symbolic
// link, a FIFO, a device node, a socket or a directory. An atomic write renames a new regular file
// over the path, which would replace the link or the node itself (as root, `/dev/stdout` or a
// device of the system) instead of writing through it; strata writes regular files only.
void require_regular_output(const std::filesystem::path& path);

// Writes `contents` to a temporary file beside `path`, flushes it, then renames it over `path`, so
// that readers see the old file or the new one and never half of one. `path` must be absent or a
// regular file (require_regular_output).
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);
// The same for contents too large to hold twice (a model's weights): `write` streams them into the
// open temporary file and returns false when a write failed.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<bool(std::FILE*)>& write);

}  // namespace strata::schemas
