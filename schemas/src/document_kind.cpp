#include "strata/schemas/document_kind.h"

#include <fmt/format.h>

namespace strata::schemas {

void check_document_header(const ObjectReader& reader, DocumentKind kind, int schema_version) {
  const DocumentKind found = reader.choice(kKindKey, kStrataDocumentKindNames);
  if (found != kind) {
    reader.at(kKindKey).fail(fmt::format("expected a {} document, got \"{}\"",
                                         name_of(kind, kStrataDocumentKindNames),
                                         name_of(found, kStrataDocumentKindNames)));
  }
  const std::int64_t version = reader.integer(kSchemaVersionKey, {.minimum = 1});
  if (version != schema_version) {
    reader.at(kSchemaVersionKey)
        .fail(fmt::format("version {} is not supported; this strata reads schema_version {}",
                          version, schema_version));
  }
  if (reader.has(kEditorSchemaKey)) reader.string(kEditorSchemaKey);
  if (reader.has(kDescriptionKey)) reader.string(kDescriptionKey);
}

namespace {

// "\"model\", \"cluster\", ... or \"phases\"": every kind a Strata file can be.
std::string kind_names() {
  std::string names;
  for (std::size_t i = 0; i < kStrataDocumentKindNames.size(); ++i) {
    if (i > 0) names += i + 1 == kStrataDocumentKindNames.size() ? " or " : ", ";
    names += fmt::format("\"{}\"", kStrataDocumentKindNames[i].name);
  }
  return names;
}

}  // namespace

DocumentKind detect_document_kind(const nlohmann::json& document, const JsonLocation& location) {
  require_object(document, location);
  if (document.contains(kKindKey)) {
    const nlohmann::json& kind = document.at(std::string(kKindKey));
    if (kind.is_string()) {
      if (auto value = value_of(kind.get<std::string>(), kStrataDocumentKindNames)) return *value;
    }
    (location / kKindKey)
        .fail(fmt::format("expected {}, got {}", kind_names(), describe_json_value(kind)));
  }
  if (document.contains("architectures") || document.contains("model_type")) {
    return DocumentKind::hf_config;
  }
  location.fail(
      fmt::format("cannot tell what this file is: a Strata file has \"kind\": {}, and a Hugging "
                  "Face config.json has \"architectures\"",
                  kind_names()));
}

}  // namespace strata::schemas
