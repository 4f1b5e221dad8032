// Loading model, cluster and plan files from disk or from presets, as the command line names
// them. Used by tools/ and by any component that takes user-named inputs.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <variant>

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/document_kind.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_set.h"
#include "strata/schemas/training_phases.h"

namespace strata::schemas {

ModelConfig load_model_file(const std::filesystem::path& path);  // Strata model or HF config.json
ClusterConfig load_cluster_file(const std::filesystem::path& path);
// Also checks that a custom schedule file exists, relative to the plan's directory.
Plan load_plan_file(const std::filesystem::path& path);
// Also checks the custom schedule files of its plans, relative to the set's directory.
PlanSet load_plan_set_file(const std::filesystem::path& path);
TrainingPhases load_training_phases_file(const std::filesystem::path& path);
// What a file is (its "kind", or a Hugging Face config), read and parsed as JSON only.
DocumentKind document_kind_of_file(const std::filesystem::path& path);

// A preset name, or else a file path. `option` ("--model") names the source in errors.
ModelConfig resolve_model(std::string_view spec, std::string_view option = "--model");
ClusterConfig resolve_cluster(std::string_view spec, std::string_view option = "--cluster");

// Any file `strata validate` accepts, with what it turned out to be.
struct LoadedDocument {
  DocumentKind kind;
  std::variant<ModelConfig, ClusterConfig, Plan, PlanSet, TrainingPhases> content;
};
LoadedDocument load_document_file(const std::filesystem::path& path);

// Writes a document as indented JSON, atomically.
void write_json_document(const std::filesystem::path& path, const nlohmann::json& document);

}  // namespace strata::schemas
