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

// Writes `contents` to a temporary file beside `path`, flushes it, then renames it over `path`, so
// that readers see the old file or the new one and never half of one.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);
// The same for contents too large to hold twice (a model's weights): `write` streams them into the
// open temporary file and returns false when a write failed.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<bool(std::FILE*)>& write);

}  // namespace strata::schemas
