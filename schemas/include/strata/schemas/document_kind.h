// DocumentKind: which Strata format a JSON document is (its "kind" and "schema_version" keys),
// and recognition of Hugging Face config.json files. Used by the parsers and `strata validate`.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <optional>

#include "strata/schemas/enum_names.h"
#include "strata/schemas/object_reader.h"

namespace strata::schemas {

enum class DocumentKind { model, cluster, plan, plan_set, phases, hf_config };

inline constexpr std::array<EnumName<DocumentKind>, 5> kStrataDocumentKindNames{
    {{DocumentKind::model, "model"},
     {DocumentKind::cluster, "cluster"},
     {DocumentKind::plan, "plan"},
     {DocumentKind::plan_set, "plan_set"},
     {DocumentKind::phases, "phases"}}};

// Every Strata file starts with these keys; "$schema" lets editors find the schema file.
inline constexpr std::string_view kSchemaVersionKey = "schema_version";
inline constexpr std::string_view kKindKey = "kind";
inline constexpr std::string_view kEditorSchemaKey = "$schema";
inline constexpr std::string_view kDescriptionKey = "description";

// Fails unless the document says it is `kind` in a schema_version this build reads.
void check_document_header(const ObjectReader& reader, DocumentKind kind, int schema_version);

// The kind of a parsed document: a Strata "kind", or a Hugging Face config (it has
// "architectures" or "model_type" and no "kind"). Fails with the reason when it is neither.
DocumentKind detect_document_kind(const nlohmann::json& document, const JsonLocation& location);

}  // namespace strata::schemas
