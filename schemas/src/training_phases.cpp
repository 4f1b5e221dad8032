#include "strata/schemas/training_phases.h"

#include <fmt/format.h>

#include <set>

#include "strata/schemas/document_kind.h"
#include "strata/schemas/object_reader.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_set.h"

namespace strata::schemas {

std::int64_t TrainingPhases::total_steps() const {
  std::int64_t total = 0;
  for (const TrainingPhase& phase : phases) total += phase.steps;
  return total;
}

TrainingPhases parse_training_phases(const nlohmann::json& document, const JsonLocation& location) {
  const ObjectReader reader(
      document, location,
      {kSchemaVersionKey, kKindKey, kEditorSchemaKey, kDescriptionKey, "phases"});
  check_document_header(reader, DocumentKind::phases, kTrainingPhasesSchemaVersion);
  TrainingPhases parsed;
  parsed.description = reader.optional_string(kDescriptionKey);
  const nlohmann::json& phases = reader.array("phases", 1);
  if (phases.size() > kMaxTrainingPhases) {
    reader.at("phases").fail(
        fmt::format("{} phases: at most {}", phases.size(), kMaxTrainingPhases));
  }
  std::set<std::string> names;
  std::int64_t total_steps = 0;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const ObjectReader phase(phases[i], reader.at("phases") / i,
                             {"name", "steps", "global_batch_size", "seq_length"});
    TrainingPhase entry;
    // Names become the plan set's ids (strata train --switch STEP:ID), so they follow its rule.
    entry.name = phase.has("name") ? read_plan_id(phase, "name") : fmt::format("phase{}", i + 1);
    if (!names.insert(entry.name).second) {
      (phase.has("name") ? phase.at("name") : phase.location())
          .fail(fmt::format("\"{}\" names another phase too", entry.name));
    }
    entry.steps = phase.integer("steps", {1, kMaxTrainingSteps});
    // The plan set written for them counts every step of the run in one number.
    if (entry.steps > kMaxTrainingSteps - total_steps) {
      phase.at("steps").fail(
          fmt::format("{}: the phases would last {} steps together, more than "
                      "a run's {}",
                      entry.steps, total_steps + entry.steps, kMaxTrainingSteps));
    }
    total_steps += entry.steps;
    entry.global_batch_size = phase.integer("global_batch_size", {1, kMaxGlobalBatchSize});
    entry.seq_length = phase.integer("seq_length", {1, kMaxSeqLength});
    parsed.phases.push_back(std::move(entry));
  }
  return parsed;
}

nlohmann::json training_phases_to_json(const TrainingPhases& phases) {
  nlohmann::json document{{std::string(kSchemaVersionKey), kTrainingPhasesSchemaVersion},
                          {std::string(kKindKey), "phases"}};
  if (phases.description) document[std::string(kDescriptionKey)] = *phases.description;
  document["phases"] = nlohmann::json::array();
  for (const TrainingPhase& phase : phases.phases) {
    document["phases"].push_back({{"name", phase.name},
                                  {"steps", phase.steps},
                                  {"global_batch_size", phase.global_batch_size},
                                  {"seq_length", phase.seq_length}});
  }
  return document;
}

}  // namespace strata::schemas
