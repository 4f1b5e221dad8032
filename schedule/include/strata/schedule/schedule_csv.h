// Custom schedules as CSV files, one row per pipeline rank, one action per cell, in the grammar of
// action.h (the format PyTorch pipelining's _load_csv reads). Used by plans with schedule
// "custom" and by `strata schedule --write-csv` to start one from a built-in schedule.
#pragma once

#include <filesystem>
#include <string>

#include "strata/schedule/pipeline_schedule.h"

namespace strata::schedule {

// Reads the file; empty cells are skipped. A cell that is not an action, or more or fewer rows
// than pp, is an InputError naming the file, line and column. Completeness and deadlock are
// checked separately (check_schedule).
PipelineSchedule read_schedule_csv(const std::filesystem::path& path, int pp, int vpp,
                                   int num_micro_batches);
std::string schedule_to_csv(const PipelineSchedule& schedule);

}  // namespace strata::schedule
