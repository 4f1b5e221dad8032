#include "strata/schemas/json_location.h"

#include "strata/schemas/input_error.h"

namespace strata::schemas {

JsonLocation::JsonLocation(std::string source, std::string pointer)
    : source_(std::move(source)), pointer_(std::move(pointer)) {}

JsonLocation JsonLocation::operator/(std::string_view key) const {
  std::string escaped;
  escaped.reserve(key.size());
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return JsonLocation(source_, pointer_ + "/" + escaped);
}

JsonLocation JsonLocation::operator/(std::size_t index) const {
  return JsonLocation(source_, pointer_ + "/" + std::to_string(index));
}

void JsonLocation::fail(std::string rule) const {
  throw InputError(source_, pointer_, std::move(rule));
}

}  // namespace strata::schemas
