#include "strata/schemas/document_loader.h"

#include <fmt/format.h>

#include "strata/schemas/closest_name.h"
#include "strata/schemas/hf_config_import.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/presets.h"

namespace strata::schemas {
namespace {

// An HF checkpoint directory is named after the model ("Llama-3.1-8B/config.json").
std::string hf_fallback_name(const std::filesystem::path& path) {
  const std::filesystem::path absolute = std::filesystem::absolute(path);
  const std::string directory = absolute.parent_path().filename().string();
  return path.filename() == "config.json" && !directory.empty() ? directory : path.stem().string();
}

ModelConfig model_from_document(const nlohmann::json& document, const std::filesystem::path& path,
                                DocumentKind kind) {
  const JsonLocation location(path.string());
  if (kind == DocumentKind::hf_config)
    return import_hf_config(document, location, hf_fallback_name(path));
  return parse_model(document, location);
}

// A name as a message shows it: a 300-character one by its start and length.
std::string shortened_name(std::string_view name) {
  if (name.size() <= 80) return std::string(name);
  return fmt::format("{}…({} characters)", name.substr(0, 40), name.size());
}

// Whether a path names a file; a name the file system cannot hold (too long, say) names none.
bool is_file(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

void check_custom_schedule_file(const Plan& plan, const std::filesystem::path& plan_path) {
  if (plan.schedule.type != ScheduleType::custom) return;
  const std::filesystem::path schedule = plan_path.parent_path() / plan.schedule.file;
  if (!is_file(schedule)) {
    throw InputError(plan_path.string(), "/schedule/file",
                     fmt::format("\"{}\" does not exist (looked for {})", plan.schedule.file,
                                 schedule.string()));
  }
}

void require_kind(DocumentKind found, std::initializer_list<DocumentKind> wanted,
                  const std::filesystem::path& path) {
  for (DocumentKind kind : wanted) {
    if (kind == found) return;
  }
  const std::string found_name =
      found == DocumentKind::hf_config
          ? "a Hugging Face config"
          : fmt::format("a {} file", name_of(found, kStrataDocumentKindNames));
  throw InputError(path.string(), "/kind",
                   fmt::format("this is {}, not a {} file", found_name,
                               name_of(*wanted.begin(), kStrataDocumentKindNames)));
}

}  // namespace

ModelConfig load_model_file(const std::filesystem::path& path) {
  const nlohmann::json document = read_json_file(path);
  const DocumentKind kind = detect_document_kind(document, JsonLocation(path.string()));
  require_kind(kind, {DocumentKind::model, DocumentKind::hf_config}, path);
  return model_from_document(document, path, kind);
}

ClusterConfig load_cluster_file(const std::filesystem::path& path) {
  const nlohmann::json document = read_json_file(path);
  require_kind(detect_document_kind(document, JsonLocation(path.string())), {DocumentKind::cluster},
               path);
  return parse_cluster(document, JsonLocation(path.string()));
}

Plan load_plan_file(const std::filesystem::path& path) {
  const nlohmann::json document = read_json_file(path);
  require_kind(detect_document_kind(document, JsonLocation(path.string())), {DocumentKind::plan},
               path);
  Plan plan = parse_plan(document, JsonLocation(path.string()));
  check_custom_schedule_file(plan, path);
  return plan;
}

DocumentKind document_kind_of_file(const std::filesystem::path& path) {
  return detect_document_kind(read_json_file(path), JsonLocation(path.string()));
}

PlanSet load_plan_set_file(const std::filesystem::path& path) {
  const nlohmann::json document = read_json_file(path);
  require_kind(detect_document_kind(document, JsonLocation(path.string())),
               {DocumentKind::plan_set}, path);
  PlanSet set = parse_plan_set(document, JsonLocation(path.string()));
  for (const PlanSetEntry& entry : set.plans) check_custom_schedule_file(entry.plan, path);
  return set;
}

TrainingPhases load_training_phases_file(const std::filesystem::path& path) {
  const nlohmann::json document = read_json_file(path);
  require_kind(detect_document_kind(document, JsonLocation(path.string())), {DocumentKind::phases},
               path);
  return parse_training_phases(document, JsonLocation(path.string()));
}

ModelConfig resolve_model(std::string_view spec, std::string_view option) {
  if (is_model_preset(spec)) return model_preset(spec);
  if (is_file(spec)) return load_model_file(spec);
  const std::vector<std::string_view> names = model_preset_names();
  const auto suggestion = closest_name(spec, names);
  throw InputError(
      std::string(option), "",
      fmt::format("\"{}\" is neither a model preset nor a file{}", shortened_name(spec),
                  suggestion ? fmt::format("; did you mean \"{}\"?", *suggestion)
                             : "; `strata presets` lists the presets"));
}

ClusterConfig resolve_cluster(std::string_view spec, std::string_view option) {
  if (is_cluster_preset_spec(spec)) return cluster_preset(spec);
  if (is_file(spec)) return load_cluster_file(spec);
  // FILE:NODES or FILE:NODESxGPUS: a cluster file used with fewer (or more) nodes, as presets are.
  if (const std::size_t colon = spec.rfind(':');
      colon != std::string_view::npos && is_file(spec.substr(0, colon))) {
    return with_node_counts(load_cluster_file(spec.substr(0, colon)), spec, spec.substr(colon + 1));
  }
  const std::vector<std::string_view> names = cluster_preset_names();
  const auto suggestion = closest_name(spec.substr(0, spec.find(':')), names);
  throw InputError(
      std::string(option), "",
      fmt::format("\"{}\" is neither a cluster preset (NAME or NAME:NODES) nor a file{}",
                  shortened_name(spec),
                  suggestion ? fmt::format("; did you mean \"{}\"?", *suggestion)
                             : "; `strata presets` lists the presets"));
}

LoadedDocument load_document_file(const std::filesystem::path& path) {
  const nlohmann::json document = read_json_file(path);
  const JsonLocation location(path.string());
  const DocumentKind kind = detect_document_kind(document, location);
  switch (kind) {
    case DocumentKind::model:
    case DocumentKind::hf_config:
      return {kind, model_from_document(document, path, kind)};
    case DocumentKind::cluster:
      return {kind, parse_cluster(document, location)};
    case DocumentKind::plan: {
      Plan plan = parse_plan(document, location);
      check_custom_schedule_file(plan, path);
      return {kind, std::move(plan)};
    }
    case DocumentKind::plan_set: {
      PlanSet set = parse_plan_set(document, location);
      for (const PlanSetEntry& entry : set.plans) check_custom_schedule_file(entry.plan, path);
      return {kind, std::move(set)};
    }
    case DocumentKind::phases:
      return {kind, parse_training_phases(document, location)};
  }
  location.fail("unreachable document kind");
}

void write_json_document(const std::filesystem::path& path, const nlohmann::json& document) {
  write_file_atomically(path, document.dump(2) + "\n");
}

}  // namespace strata::schemas
