// ObjectReader: reads one JSON object field by field with types, ranges and allowed keys checked,
// failing with an InputError that names the file, the JSON pointer and the rule.
// Used by every format parser in schemas/ (model, cluster, plan) and by later file formats.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/schemas/enum_names.h"
#include "strata/schemas/json_location.h"

namespace strata::schemas {

// "an integer", "a string (\"32\")"... for messages that say what was found instead.
std::string describe_json_value(const nlohmann::json& value);
// A number as people write it: 4096, 0.1, 1e+30.
std::string format_json_number(double value);

struct IntegerRange {
  std::int64_t minimum = std::numeric_limits<std::int64_t>::min();
  std::int64_t maximum = std::numeric_limits<std::int64_t>::max();
};

struct NumberRange {
  double minimum = -std::numeric_limits<double>::infinity();
  double maximum = std::numeric_limits<double>::infinity();
  bool minimum_exclusive = false;
  bool maximum_exclusive = false;
};

// Checks a value that is not necessarily inside an object (array elements, the document root).
std::int64_t read_integer(const nlohmann::json& value, const JsonLocation& location,
                          IntegerRange range);
double read_number(const nlohmann::json& value, const JsonLocation& location, NumberRange range);
void require_object(const nlohmann::json& value, const JsonLocation& location);
void require_array(const nlohmann::json& value, const JsonLocation& location,
                   std::size_t minimum_items = 0);
// One of `names` (an array element's enum name); anything else fails with the nearest name.
std::string_view read_choice_name(const nlohmann::json& value, const JsonLocation& location,
                                  const std::vector<std::string_view>& names);
template <typename Enum, std::size_t N>
Enum read_choice(const nlohmann::json& value, const JsonLocation& location,
                 const std::array<EnumName<Enum>, N>& table) {
  return *value_of(read_choice_name(value, location, names_of(table)), table);
}

class ObjectReader {
 public:
  // Fails unless `value` is an object whose keys are all in `allowed_keys`; an unknown key is
  // reported with the nearest allowed key as a suggestion.
  ObjectReader(const nlohmann::json& value, JsonLocation location,
               std::initializer_list<std::string_view> allowed_keys);
  // The same, for keys that come from a table (an object keyed by an enum's names).
  ObjectReader(const nlohmann::json& value, JsonLocation location,
               const std::vector<std::string_view>& allowed_keys);

  const JsonLocation& location() const { return location_; }
  JsonLocation at(std::string_view key) const { return location_ / key; }
  bool has(std::string_view key) const;

  const nlohmann::json& value(std::string_view key) const;  // required, any type
  std::int64_t integer(std::string_view key, IntegerRange range) const;
  std::optional<std::int64_t> optional_integer(std::string_view key, IntegerRange range) const;
  double number(std::string_view key, NumberRange range) const;
  std::optional<double> optional_number(std::string_view key, NumberRange range) const;
  bool boolean(std::string_view key) const;
  std::optional<bool> optional_boolean(std::string_view key) const;
  std::string string(std::string_view key) const;  // non-empty
  std::optional<std::string> optional_string(std::string_view key) const;
  const nlohmann::json& object(std::string_view key) const;
  const nlohmann::json& array(std::string_view key, std::size_t minimum_items = 0) const;

  template <typename Enum, std::size_t N>
  Enum choice(std::string_view key, const std::array<EnumName<Enum>, N>& table) const {
    return *value_of(read_choice(key, names_of(table)), table);
  }
  template <typename Enum, std::size_t N>
  std::optional<Enum> optional_choice(std::string_view key,
                                      const std::array<EnumName<Enum>, N>& table) const {
    if (!has(key)) return std::nullopt;
    return choice(key, table);
  }
  // A non-empty array of names from `table`, in order (repeats are the caller's rule).
  template <typename Enum, std::size_t N>
  std::vector<Enum> choices(std::string_view key,
                            const std::array<EnumName<Enum>, N>& table) const {
    const nlohmann::json& items = array(key, 1);
    std::vector<Enum> result;
    for (std::size_t i = 0; i < items.size(); ++i) {
      result.push_back(schemas::read_choice(items[i], at(key) / i, table));
    }
    return result;
  }

 private:
  std::string_view read_choice(std::string_view key,
                               const std::vector<std::string_view>& names) const;

  const nlohmann::json& object_;
  JsonLocation location_;
};

}  // namespace strata::schemas
