#include "strata/schemas/json_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_location.h"

namespace strata::schemas {
namespace {

std::string line_and_column(std::string_view text, std::size_t byte_offset) {
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i + 1 < byte_offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("line {}, column {}", line, column);
}

// nlohmann's message is "[json.exception.parse_error.101] parse error at line 1, column 4: WHAT";
// keep WHAT, since we print our own position.
std::string parse_error_explanation(const nlohmann::json::parse_error& error) {
  const std::string message = error.what();
  const std::size_t column = message.find("column ");
  const std::size_t colon = message.find(": ", column == std::string::npos ? 0 : column);
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

// Tracks the JSON pointer of the value being parsed and the keys seen in each open object.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const std::string& source) : source_(source) {}

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using event_t = nlohmann::json::parse_event_t;
    switch (event) {
      case event_t::object_start:
      case event_t::array_start:
        enter_value();
        frames_.push_back(Frame{event == event_t::object_start, {}, "", 0});
        break;
      case event_t::key: {
        Frame& frame = frames_.back();
        frame.key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.key).second) {
          location_of_key().fail("duplicate key; each key may appear once in an object");
        }
        break;
      }
      case event_t::object_end:
      case event_t::array_end:
        frames_.pop_back();
        break;
      case event_t::value:
        enter_value();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string key;
    std::size_t next_index;
  };

  void enter_value() {
    if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().next_index;
  }

  JsonLocation location_of_key() const {
    JsonLocation location(source_);
    for (const Frame& frame : frames_) {
      location = frame.is_object ? location / frame.key : location / (frame.next_index - 1);
    }
    return location;
  }

  const std::string& source_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text, DuplicateKeyCheck(source));
  } catch (const nlohmann::json::parse_error& error) {
    throw InputError(source, line_and_column(text, error.byte),
                     "invalid JSON: " + parse_error_explanation(error));
  }
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw InputError(path.string(), "", fmt::format("cannot open: {}", std::strerror(errno)));
  if (std::filesystem::is_directory(path)) throw InputError(path.string(), "", "is a directory");
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) throw InputError(path.string(), "", "read failed");
  return contents.str();
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json_text(read_text_file(path), path.string());
}

void write_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  const std::filesystem::path temporary =
      path.string() + fmt::format(".tmp.{}", static_cast<long>(::getpid()));
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) {
    throw InputError(path.string(), "", fmt::format("cannot write: {}", std::strerror(errno)));
  }
  const bool written = std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int saved_errno = errno;
  const bool closed = std::fclose(file) == 0;
  if (!written || !flushed || !closed) {
    std::filesystem::remove(temporary);
    throw InputError(path.string(), "",
                     fmt::format("write failed: {}", std::strerror(saved_errno)));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary);
    throw InputError(path.string(), "", "cannot rename into place: " + error.message());
  }
}

}  // namespace strata::schemas
