#include "strata/schemas/json_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
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

// Tracks the JSON pointer of the value being parsed and the keys seen in each open object. The
// state is shared because nlohmann copies the callback, and a number that overflows a double
// fails inside the parser, where only the state says whose value it was.
class DuplicateKeyCheck {
 public:
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string key;
    std::size_t next_index;
  };
  struct State {
    std::string source;
    std::vector<Frame> frames;

    // Where the value now being read goes: the current key, or the next element of an array.
    JsonLocation location_of_value() const {
      JsonLocation location(source);
      for (std::size_t i = 0; i < frames.size(); ++i) {
        const Frame& frame = frames[i];
        const bool innermost = i + 1 == frames.size();
        location = frame.is_object
                       ? location / frame.key
                       : location / (innermost ? frame.next_index : frame.next_index - 1);
      }
      return location;
    }
  };

  explicit DuplicateKeyCheck(std::shared_ptr<State> state) : state_(std::move(state)) {}

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using event_t = nlohmann::json::parse_event_t;
    std::vector<Frame>& frames = state_->frames;
    switch (event) {
      case event_t::object_start:
      case event_t::array_start:
        enter_value();
        frames.push_back(Frame{event == event_t::object_start, {}, "", 0});
        break;
      case event_t::key: {
        Frame& frame = frames.back();
        frame.key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.key).second) {
          state_->location_of_value().fail("duplicate key; each key may appear once in an object");
        }
        break;
      }
      case event_t::object_end:
      case event_t::array_end:
        frames.pop_back();
        break;
      case event_t::value:
        enter_value();
        break;
    }
    return true;
  }

 private:
  void enter_value() {
    if (!state_->frames.empty() && !state_->frames.back().is_object) {
      ++state_->frames.back().next_index;
    }
  }

  std::shared_ptr<State> state_;
};

// Long tokens that nlohmann quotes back ("last read: '…'", a 100,000-digit number) shortened.
std::string shortened(std::string text) {
  constexpr std::size_t kLimit = 60;
  std::string result;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find_first_of(" '\"", start);
    if (end == std::string::npos) end = text.size();
    const std::size_t length = end - start;
    if (length > kLimit) {
      result += fmt::format("{}…({} characters)", text.substr(start, kLimit / 2), length);
    } else {
      result += text.substr(start, length);
    }
    if (end < text.size()) result += text[end];
    start = end + 1;
  }
  return result;
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  const auto state =
      std::make_shared<DuplicateKeyCheck::State>(DuplicateKeyCheck::State{source, {}});
  try {
    return nlohmann::json::parse(text, DuplicateKeyCheck(state));
  } catch (const nlohmann::json::parse_error& error) {
    throw InputError(source, line_and_column(text, error.byte),
                     "invalid JSON: " + shortened(parse_error_explanation(error)));
  } catch (const nlohmann::json::out_of_range& error) {
    // nlohmann's 406: "number overflow parsing '1e999999999'".
    const std::string message = error.what();
    const std::size_t quote = message.find('\'');
    const std::string number = quote == std::string::npos
                                   ? std::string()
                                   : message.substr(quote + 1, message.size() - quote - 2);
    state->location_of_value().fail(
        fmt::format("{} is too large for a number (beyond ±1.8e308)", shortened(number)));
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
  write_file_atomically(path, [contents](std::FILE* file) {
    return std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  });
}

void require_regular_output(const std::filesystem::path& path) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) return;  // absent (or unreachable: the write says why)
  const mode_t type = status.st_mode & S_IFMT;
  if (type == S_IFREG) return;
  const char* kind = type == S_IFLNK    ? "a symbolic link"
                     : type == S_IFIFO  ? "a FIFO"
                     : type == S_IFCHR  ? "a character device"
                     : type == S_IFBLK  ? "a block device"
                     : type == S_IFSOCK ? "a socket"
                     : type == S_IFDIR  ? "a directory"
                                        : "not a regular file";
  throw InputError(path.string(), "",
                   fmt::format("is {}: strata writes regular files only (a new file is renamed "
                               "over the path), so name a regular file or a new one",
                               kind));
}

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<bool(std::FILE*)>& write) {
  require_regular_output(path);
  const std::filesystem::path temporary =
      path.string() + fmt::format(".tmp.{}", static_cast<long>(::getpid()));
  // A new file of our own: whatever holds the name (a leftover of this pid, or a link planted to
  // make the write land elsewhere) goes first, and the open follows no link and creates the file.
  ::unlink(temporary.c_str());
  const int descriptor =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  std::FILE* file = descriptor >= 0 ? ::fdopen(descriptor, "wb") : nullptr;
  if (file == nullptr) {
    const int error = errno;
    if (descriptor >= 0) ::close(descriptor);
    throw InputError(path.string(), "", fmt::format("cannot write: {}", std::strerror(error)));
  }
  const bool written = write(file);
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
