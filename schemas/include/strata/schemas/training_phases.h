// TrainingPhases: the phases of one training run, in order — how many optimizer steps each lasts
// and the global batch and sequence length it trains with (a batch ramp, a context extension).
// `strata plan --phases FILE` chooses one plan per phase, minimising the run's predicted time
// with the switches between them, and writes a plan set (plan_set.h).
//
// Rules beyond the JSON Schema (phases.schema.json): names are unique. Whether a sequence fits a
// model is the planner's question (it knows the model), not this file's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "strata/schemas/json_location.h"

namespace strata::schemas {

inline constexpr int kTrainingPhasesSchemaVersion = 1;
inline constexpr std::size_t kMaxTrainingPhases = 64;

struct TrainingPhase {
  std::string name;  // given, or "phase<N>" counting from 1
  std::int64_t steps = 0;
  std::int64_t global_batch_size = 0;
  std::int64_t seq_length = 0;
};

struct TrainingPhases {
  std::optional<std::string> description;
  std::vector<TrainingPhase> phases;
  std::int64_t total_steps() const;
};

TrainingPhases parse_training_phases(const nlohmann::json& document, const JsonLocation& location);
nlohmann::json training_phases_to_json(const TrainingPhases& phases);

}  // namespace strata::schemas
