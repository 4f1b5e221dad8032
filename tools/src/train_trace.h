// `strata train --trace FILE`: one step as it ran on every rank beside the simulator's prediction
// of the same plan, in one Chrome trace file (the format of `strata simulate --trace`): the
// measured ranks are processes "measured: rank R (...)", the prediction's pipeline ranks follow
// as processes "predicted: pipeline rank P". Opened in https://ui.perfetto.dev, each action's
// prediction and reality sit one above the other. A run that switched layout (train --switch,
// --plan-set phases) adds each switch after the step, in order: on every measured rank as long as
// the slowest rank took, and beside them, in a process "predicted: layout switches", as long as
// its predicted transfer. Used by the train command.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "strata/executor/pipeline/pipeline_runtime.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/plan.h"

namespace strata::tools {

// Measured against predicted time of one action type on the first pipeline rank: the mean time
// one such action took.
struct ActionTypeComparison {
  std::string type;  // "F", "SEND_B", "REDUCE_GRAD", ...
  int measured_count = 0, predicted_count = 0;
  double measured_mean_s = 0, predicted_mean_s = 0;
};

struct TrainTrace {
  std::vector<ActionTypeComparison> by_type;  // in the IR's order of action types
  double measured_step_s = 0, predicted_step_s = 0;
  // The pipeline bubble as both timelines show it: the mean over ranks of the share of the step
  // spent outside compute (F, B, I, W, STEP) — waiting for other stages, and for transfers.
  double measured_bubble = 0, predicted_bubble = 0;
};

// Writes the trace (atomically) and returns the per-type comparison of world rank 0 against the
// prediction's pipeline rank 0. `measured` holds every world rank's actions of a step `plan` ran;
// `switches`, the run's layout switches.
TrainTrace write_train_trace(const std::filesystem::path& file, const schemas::Plan& plan,
                             const std::filesystem::path& plan_directory,
                             const std::vector<std::vector<executor::ExecutedAction>>& measured,
                             const std::vector<executor::SwitchRecord>& switches);

}  // namespace strata::tools
