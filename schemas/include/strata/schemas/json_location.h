// JsonLocation: a file name plus a JSON pointer into it, so every error can say where it is.
// Used by the readers and validators of all file formats in schemas/ and by later formats.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata::schemas {

class JsonLocation {
 public:
  explicit JsonLocation(std::string source, std::string pointer = "");

  // The location of a member or an element below this one (RFC 6901 escaping of '~' and '/').
  JsonLocation operator/(std::string_view key) const;
  JsonLocation operator/(std::size_t index) const;

  const std::string& source() const { return source_; }
  const std::string& pointer() const { return pointer_; }

  // Throws InputError(source, pointer, rule).
  [[noreturn]] void fail(std::string rule) const;

 private:
  std::string source_;
  std::string pointer_;
};

}  // namespace strata::schemas
