// EnumName tables: the one place each enum's spelling in files is written down.
// Used by the format readers/writers in schemas/ and by reports in tools/.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace strata::schemas {

template <typename Enum>
struct EnumName {
  Enum value;
  std::string_view name;
};

template <typename Enum, std::size_t N>
constexpr std::string_view name_of(Enum value, const std::array<EnumName<Enum>, N>& table) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

template <typename Enum, std::size_t N>
constexpr std::optional<Enum> value_of(std::string_view name,
                                       const std::array<EnumName<Enum>, N>& table) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// Every name of a table, in its order: the keys an object keyed by the enum may have.
template <typename Enum, std::size_t N>
std::vector<std::string_view> names_of(const std::array<EnumName<Enum>, N>& table) {
  std::vector<std::string_view> names;
  names.reserve(N);
  for (const auto& entry : table) names.push_back(entry.name);
  return names;
}

}  // namespace strata::schemas
