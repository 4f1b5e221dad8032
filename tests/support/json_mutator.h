// The fuzz tests' mutation of a JSON document (tools/cli_fuzz_test.cpp): keys deleted or
// duplicated, types swapped, extreme numbers, the text truncated or a byte flipped — seeded, so
// that a failing case replays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace strata::testing {

// A mutation of a JSON document, as text.
class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : random_(seed) {}

  std::string mutate(const nlohmann::json& document) {
    switch (pick(7)) {
      case 0:
        return delete_key(document);
      case 1:
        return duplicate_key(document);
      case 2:
        return replace_value(document, swapped_type());
      case 3:
        return replace_value(document, extreme_number());
      case 4:
        return truncate(document.dump(2));
      case 5:
        return flip_bytes(document.dump(2));
      default:
        return replace_value(document, "{\"unexpected\": 1}");
    }
  }

  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_);
  }
  template <class T>
  const T& choose(const std::vector<T>& values) {
    return values[pick(values.size())];
  }

 private:
  // Every value's pointer in the document.
  void collect(const nlohmann::json& value, const nlohmann::json::json_pointer& at,
               std::vector<nlohmann::json::json_pointer>& pointers, bool objects_only) {
    if (!objects_only || value.is_object()) pointers.push_back(at);
    if (value.is_object()) {
      for (const auto& [key, member] : value.items())
        collect(member, at / key, pointers, objects_only);
    } else if (value.is_array()) {
      for (std::size_t i = 0; i < value.size(); ++i)
        collect(value[i], at / i, pointers, objects_only);
    }
  }

  std::string delete_key(nlohmann::json document) {
    std::vector<nlohmann::json::json_pointer> pointers;
    collect(document, nlohmann::json::json_pointer(), pointers, false);
    const nlohmann::json::json_pointer at = choose(pointers);
    if (at.empty()) return document.dump(2);
    nlohmann::json& parent = document[at.parent_pointer()];
    if (parent.is_object()) {
      parent.erase(at.back());
    } else if (parent.is_array()) {
      parent.erase(std::stoul(at.back()));
    }
    return document.dump(2);
  }

  // The text of `document` with the value at a random pointer written as `replacement` (raw
  // text: it may be invalid JSON or a number no double holds).
  std::string replace_value(const nlohmann::json& document, const std::string& replacement) {
    std::vector<nlohmann::json::json_pointer> pointers;
    collect(document, nlohmann::json::json_pointer(), pointers, false);
    return replace_value_at(document, choose(pointers), replacement);
  }

  std::string duplicate_key(nlohmann::json document) {
    std::vector<nlohmann::json::json_pointer> objects;
    collect(document, nlohmann::json::json_pointer(), objects, true);
    const nlohmann::json::json_pointer at = choose(objects);
    const nlohmann::json& object = document[at];
    if (object.empty()) return document.dump(2);
    const auto first = object.begin();
    const std::string repeated =
        nlohmann::json(first.key()).dump() + ": " + first.value().dump() + ", ";
    std::string body = object.dump();
    body.insert(1, repeated);
    return replace_value_at(document, at, body);
  }

  std::string replace_value_at(nlohmann::json document, const nlohmann::json::json_pointer& at,
                               const std::string& replacement) {
    const std::string marker = "@@strata-fuzz-marker@@";
    document[at] = marker;
    std::string text = document.dump(2);
    text.replace(text.find("\"" + marker + "\""), marker.size() + 2, replacement);
    return text;
  }

  std::string swapped_type() {
    static const std::vector<std::string> kValues = {
        "\"text\"", "\"\"", "true", "null", "[]", "{}", "[1, 2]", "\"32\"", "0", "-1", "1.5"};
    return choose(kValues);
  }

  std::string extreme_number() {
    static const std::vector<std::string> kValues = {"0",
                                                     "-1",
                                                     "1e300",
                                                     "-1e300",
                                                     "9223372036854775807",
                                                     "9223372036854775808",
                                                     "18446744073709551616",
                                                     "1e999999999",
                                                     "-1e999999999",
                                                     "4.9e-324",
                                                     "1e-310",
                                                     "2e-7",
                                                     "0.5",
                                                     "2147483647",
                                                     "16777217",
                                                     "4096",
                                                     "1e15",
                                                     std::string(400, '9'),
                                                     "1e-400",
                                                     "-0",
                                                     "65536"};
    return choose(kValues);
  }

  std::string truncate(const std::string& text) { return text.substr(0, pick(text.size() + 1)); }

  std::string flip_bytes(std::string text) {
    const std::size_t flips = 1 + pick(3);
    for (std::size_t i = 0; i < flips && !text.empty(); ++i) {
      text[pick(text.size())] ^= static_cast<char>(1 << pick(8));
    }
    return text;
  }

  std::mt19937_64 random_;
};

}  // namespace strata::testing
