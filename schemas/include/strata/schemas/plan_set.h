// PlanSet: several plans for one model on one world of ranks, each under an id, with the phases
// of a run that uses them (from which step on each plan trains) and, where a tool predicted them,
// the costs of switching between pairs of them. `strata train --plan-set` runs the phases,
// switching layout in memory at their boundaries (executor/train/trainer.h).
//
// Rules beyond the JSON Schema (plan_set.schema.json): ids are unique; every plan is of the
// first plan's model and precision and has its world size; phases start at step 0 and their
// first steps increase; phases and switches name ids the set holds; total_steps is past the last
// phase's first step.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "strata/schemas/json_location.h"
#include "strata/schemas/object_reader.h"
#include "strata/schemas/plan.h"

namespace strata::schemas {

inline constexpr int kPlanSetSchemaVersion = 1;
// A run's optimizer steps (strata train --steps, a plan set's total_steps and first steps, the
// steps of a phases file together).
inline constexpr std::int64_t kMaxTrainingSteps = std::int64_t{1} << 40;

struct PlanSetEntry {
  std::string id;
  Plan plan;
};

struct PlanSetPhase {
  std::int64_t first_step = 0;  // optimizer steps done when the phase starts
  std::string plan;             // an id of the set
};

// A predicted switch: the most bytes of state any rank sends and receives, and its time.
struct PlanSwitchCost {
  std::string from, to;
  std::int64_t most_sent_bytes = 0;
  std::int64_t most_received_bytes = 0;
  double seconds = 0;
};

struct PlanSet {
  std::optional<std::string> description;
  std::vector<PlanSetEntry> plans;
  std::vector<PlanSetPhase> phases;  // empty: the first plan throughout
  std::vector<PlanSwitchCost> switches;
  // The optimizer steps of the run the phases were planned for (strata plan --phases): the last
  // phase lasts until then. Absent: the run's length is the trainer's --steps.
  std::optional<std::int64_t> total_steps;
  // The plan under `id`; null if the set has none.
  const PlanSetEntry* find(const std::string& id) const;
  // "tp2dp2, dp4, pp2": the ids in order, for messages.
  std::string id_list() const;
};

// Ids are names a command line can carry (--switch STEP:ID): 1 to 64 letters, digits, '.', '_'
// and '-'. Reads one from `key`, failing on any other string.
std::string read_plan_id(const ObjectReader& reader, std::string_view key);

PlanSet parse_plan_set(const nlohmann::json& document, const JsonLocation& location);
nlohmann::json plan_set_to_json(const PlanSet& set);

}  // namespace strata::schemas
