// The schedule a plan runs: its built-in generator or its custom CSV, with sends, receives and
// the per-step actions in place. The one entry point the simulator and the executor call.
#pragma once

#include <filesystem>

#include "strata/schedule/pipeline_schedule.h"
#include "strata/schemas/plan.h"

namespace strata::schedule {

// What the plan asks besides the pipeline: ZeRO-3 gathers, data-parallel gradient reduction over
// dp·cp replicas, the tied-embedding all-reduce when the embedding and LM head are on different
// ranks.
StepActions step_actions_of(const schemas::Plan& plan);

// A custom schedule file is read relative to `plan_directory`; sends and receives, and the
// per-step actions, are added when the file has none of them, and the result is checked
// (check_schedule) before it is returned. Built-in schedules are correct by construction (their
// tests check them the same way).
PipelineSchedule build_plan_schedule(const schemas::Plan& plan,
                                     const std::filesystem::path& plan_directory);

}  // namespace strata::schedule
