// What the simulator predicts for a plan set (`strata simulate --plan SET`): each plan's step,
// and for the set's phases the run as a whole — each phase's steps at its plan's step time, and
// the predicted transfer of each switch between them (switch_prediction.h) — and, as a trace,
// one step of each phase in order with the switches between them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "strata/planner/switch_pricing.h"
#include "strata/schemas/plan_set.h"
#include "strata/simulator/plan_simulation.h"
#include "strata/simulator/timeline.h"

namespace strata::tools {

// The set's plan under `id`; otherwise schemas::InputError from `option`, naming the set's ids.
const schemas::PlanSetEntry& plan_of_set(const schemas::PlanSet& set, const std::string& id,
                                         const std::string& set_path, const std::string& option);

struct PhasePrediction {
  std::string plan;  // an id of the set
  std::int64_t first_step = 0;
  // Steps the phase lasts: to the next phase, or to the set's total_steps; absent for a last
  // phase of a set without total_steps.
  std::optional<std::int64_t> steps;
  double step_time_s = 0;
  std::optional<double> seconds;  // steps × step time
  // From the previous phase's layout; absent for the first phase.
  std::optional<planner::SwitchPrediction> switch_in;
};

struct PlanSetPrediction {
  std::vector<simulator::PlanSimulation> plans;  // in the set's order
  std::vector<PhasePrediction> phases;           // empty: the set has no phases
  double switch_seconds = 0;
  // Every phase's steps and every switch; absent without phases or without total_steps.
  std::optional<double> total_seconds;
};

PlanSetPrediction predict_plan_set(const schemas::PlanSet& set,
                                   const std::filesystem::path& set_directory,
                                   const simulator::SimulationOptions& options);

// One step of each phase (of each plan, for a set without phases) in order on world ranks (the
// plans' timelines must come from full simulations), each switch between them as a slice on every
// rank's collective stream as long as its predicted transfer.
simulator::Timeline phases_timeline(const schemas::PlanSet& set,
                                    const PlanSetPrediction& prediction);

nlohmann::json plan_set_prediction_to_json(const schemas::PlanSet& set,
                                           const PlanSetPrediction& prediction);
std::string render_plan_set_prediction(const schemas::PlanSet& set,
                                       const PlanSetPrediction& prediction);

}  // namespace strata::tools
