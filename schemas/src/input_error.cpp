#include "strata/schemas/input_error.h"

namespace strata::schemas {
namespace {

std::string compose_message(const std::string& source, const std::string& json_path,
                            const std::string& rule) {
  std::string message = source;
  if (!json_path.empty()) message += ": " + json_path;
  return message + ": " + rule;
}

}  // namespace

InputError::InputError(std::string source, std::string json_path, std::string rule)
    : std::runtime_error(compose_message(source, json_path, rule)),
      source_(std::move(source)),
      json_path_(std::move(json_path)),
      rule_(std::move(rule)) {}

}  // namespace strata::schemas
