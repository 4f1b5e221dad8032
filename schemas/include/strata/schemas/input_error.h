// InputError: the one error type for bad user input (files, JSON, command-line values).
// Thrown by every parser and validator in schemas/; tools/ prints what() on one line and exits 1.
#pragma once

#include <stdexcept>
#include <string>

namespace strata::schemas {

// A rule that a user's input broke, with where: the file (or "<preset NAME>", "--flag") and the
// JSON pointer inside it ("" when the whole file is meant, e.g. a syntax error). what() gives
// "file: /json/path: rule", the line users see.
class InputError : public std::runtime_error {
 public:
  InputError(std::string source, std::string json_path, std::string rule);

  const std::string& source() const { return source_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& rule() const { return rule_; }

 private:
  std::string source_;
  std::string json_path_;
  std::string rule_;
};

}  // namespace strata::schemas
