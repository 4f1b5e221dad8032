// What `strata plan --phases --format json` and the Python module's plan_phases answer: each
// phase with its chosen plan's step time and candidate rank and the switch into it, the run's
// totals, and the plan set `train --plan-set` runs.
#pragma once

#include <nlohmann/json.hpp>

#include "strata/planner/phase_planning.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/training_phases.h"

namespace strata::tools {

nlohmann::json phased_plan_report(const schemas::ModelConfig& model,
                                  const schemas::ClusterConfig& cluster,
                                  const schemas::TrainingPhases& phases,
                                  const planner::PhasedPlan& planned);

}  // namespace strata::tools
