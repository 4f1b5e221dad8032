#include "strata/schemas/object_reader.h"

#include <fmt/format.h>

#include <cmath>

#include "strata/schemas/closest_name.h"

namespace strata::schemas {
namespace {

std::string quoted_list(const std::vector<std::string_view>& names) {
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " or " : ", ";
    list += fmt::format("\"{}\"", names[i]);
  }
  return list;
}

// Integers may be written 4096 or 4096.0 (JSON Schema's "integer" accepts both).
std::optional<double> as_number(const nlohmann::json& value) {
  if (!value.is_number()) return std::nullopt;
  return value.get<double>();
}

}  // namespace

std::string format_json_number(double value) {
  if (std::isfinite(value) && std::nearbyint(value) == value && std::fabs(value) < 1e15) {
    return fmt::format("{}", static_cast<std::int64_t>(value));
  }
  return fmt::format("{}", value);
}

std::string describe_json_value(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return fmt::format("a boolean ({})", value.get<bool>());
    case nlohmann::json::value_t::string: {
      std::string text = value.get<std::string>();
      if (text.size() > 40) text = text.substr(0, 37) + "...";
      return fmt::format("a string ({})", nlohmann::json(text).dump());
    }
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return fmt::format("an integer ({})", value.dump());
    case nlohmann::json::value_t::number_float:
      return fmt::format("a number ({})", format_json_number(value.get<double>()));
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    default:
      return "a value of unsupported type";
  }
}

std::int64_t read_integer(const nlohmann::json& value, const JsonLocation& location,
                          IntegerRange range) {
  const std::optional<double> number = as_number(value);
  const bool integral = value.is_number_integer() || value.is_number_unsigned() ||
                        (number && std::isfinite(*number) && std::trunc(*number) == *number);
  if (!integral) location.fail("expected an integer, got " + describe_json_value(value));
  // Compare as the widest exact type first so that 2^64 or 1e30 is reported, not wrapped.
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(range.maximum)) {
    location.fail(fmt::format("{} is above the maximum {}", value.dump(), range.maximum));
  }
  if (value.is_number_float()) {
    if (*number > static_cast<double>(range.maximum)) {
      location.fail(
          fmt::format("{} is above the maximum {}", format_json_number(*number), range.maximum));
    }
    if (*number < static_cast<double>(range.minimum)) {
      location.fail(
          fmt::format("{} is below the minimum {}", format_json_number(*number), range.minimum));
    }
  }
  const std::int64_t integer =
      value.is_number_float() ? static_cast<std::int64_t>(*number) : value.get<std::int64_t>();
  if (integer < range.minimum) {
    location.fail(fmt::format("{} is below the minimum {}", integer, range.minimum));
  }
  if (integer > range.maximum) {
    location.fail(fmt::format("{} is above the maximum {}", integer, range.maximum));
  }
  return integer;
}

double read_number(const nlohmann::json& value, const JsonLocation& location, NumberRange range) {
  const std::optional<double> number = as_number(value);
  if (!number) location.fail("expected a number, got " + describe_json_value(value));
  const std::string shown = format_json_number(*number);
  if (range.minimum_exclusive ? !(*number > range.minimum) : !(*number >= range.minimum)) {
    location.fail(fmt::format("{} must be {} {}", shown,
                              range.minimum_exclusive ? "greater than" : "at least",
                              format_json_number(range.minimum)));
  }
  if (range.maximum_exclusive ? !(*number < range.maximum) : !(*number <= range.maximum)) {
    location.fail(fmt::format("{} must be {} {}", shown,
                              range.maximum_exclusive ? "less than" : "at most",
                              format_json_number(range.maximum)));
  }
  return *number;
}

void require_object(const nlohmann::json& value, const JsonLocation& location) {
  if (!value.is_object()) location.fail("expected an object, got " + describe_json_value(value));
}

void require_array(const nlohmann::json& value, const JsonLocation& location,
                   std::size_t minimum_items) {
  if (!value.is_array()) location.fail("expected an array, got " + describe_json_value(value));
  if (value.size() < minimum_items) {
    location.fail(fmt::format("expected at least {} item{}, got {}", minimum_items,
                              minimum_items == 1 ? "" : "s", value.size()));
  }
}

ObjectReader::ObjectReader(const nlohmann::json& value, JsonLocation location,
                           std::initializer_list<std::string_view> allowed_keys)
    : ObjectReader(value, std::move(location), std::vector<std::string_view>(allowed_keys)) {}

ObjectReader::ObjectReader(const nlohmann::json& value, JsonLocation location,
                           const std::vector<std::string_view>& allowed)
    : object_(value), location_(std::move(location)) {
  require_object(object_, location_);
  for (const auto& [key, member] : object_.items()) {
    bool known = false;
    for (std::string_view name : allowed) known = known || name == key;
    if (known) continue;
    const std::optional<std::string_view> suggestion = closest_name(key, allowed);
    at(key).fail(suggestion ? fmt::format("unknown key; did you mean \"{}\"?", *suggestion)
                            : fmt::format("unknown key; expected one of {}", quoted_list(allowed)));
  }
}

// A key given as null counts as given (and then fails its type check): the schema files say the
// same, and a null where a number belongs is more likely a mistake than a request for the default.
bool ObjectReader::has(std::string_view key) const { return object_.contains(key); }

const nlohmann::json& ObjectReader::value(std::string_view key) const {
  const auto found = object_.find(key);
  if (found == object_.end()) at(key).fail("required key is missing");
  return *found;
}

std::int64_t ObjectReader::integer(std::string_view key, IntegerRange range) const {
  return read_integer(value(key), at(key), range);
}

std::optional<std::int64_t> ObjectReader::optional_integer(std::string_view key,
                                                           IntegerRange range) const {
  if (!has(key)) return std::nullopt;
  return integer(key, range);
}

double ObjectReader::number(std::string_view key, NumberRange range) const {
  return read_number(value(key), at(key), range);
}

std::optional<double> ObjectReader::optional_number(std::string_view key, NumberRange range) const {
  if (!has(key)) return std::nullopt;
  return number(key, range);
}

bool ObjectReader::boolean(std::string_view key) const {
  const nlohmann::json& member = value(key);
  if (!member.is_boolean())
    at(key).fail("expected true or false, got " + describe_json_value(member));
  return member.get<bool>();
}

std::optional<bool> ObjectReader::optional_boolean(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return boolean(key);
}

std::string ObjectReader::string(std::string_view key) const {
  const nlohmann::json& member = value(key);
  if (!member.is_string()) at(key).fail("expected a string, got " + describe_json_value(member));
  std::string text = member.get<std::string>();
  if (text.empty()) at(key).fail("must not be empty");
  return text;
}

std::optional<std::string> ObjectReader::optional_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

const nlohmann::json& ObjectReader::object(std::string_view key) const {
  const nlohmann::json& member = value(key);
  require_object(member, at(key));
  return member;
}

const nlohmann::json& ObjectReader::array(std::string_view key, std::size_t minimum_items) const {
  const nlohmann::json& member = value(key);
  require_array(member, at(key), minimum_items);
  return member;
}

std::string_view read_choice_name(const nlohmann::json& value, const JsonLocation& location,
                                  const std::vector<std::string_view>& names) {
  if (!value.is_string()) {
    location.fail(
        fmt::format("expected one of {}, got {}", quoted_list(names), describe_json_value(value)));
  }
  const std::string text = value.get<std::string>();
  for (std::string_view name : names) {
    if (name == text) return name;
  }
  const std::optional<std::string_view> suggestion = closest_name(text, names);
  location.fail(suggestion ? fmt::format("\"{}\" is not one of {}; did you mean \"{}\"?", text,
                                         quoted_list(names), *suggestion)
                           : fmt::format("\"{}\" is not one of {}", text, quoted_list(names)));
}

std::string_view ObjectReader::read_choice(std::string_view key,
                                           const std::vector<std::string_view>& names) const {
  return read_choice_name(value(key), at(key), names);
}

}  // namespace strata::schemas
