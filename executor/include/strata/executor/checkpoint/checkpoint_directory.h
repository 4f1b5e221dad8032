// The life cycle of checkpoints in a checkpoint directory: a checkpoint is written under
// DIR/.step_00000100.tmp.PID and renamed to DIR/step_00000100 once state.json is in it, so a crash
// leaves either the previous checkpoint or the new one, never half of one; temporaries whose
// writer died are removed by the next writer; readers see only complete checkpoints, by step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace strata::executor {

// "step_00000100": the directory name of the checkpoint after `step` optimizer steps (eight
// digits or more).
std::string checkpoint_directory_name(std::int64_t step);

// DIR/.step_N.tmp.PID: where the process `writer_pid` writes the checkpoint of `step`.
std::filesystem::path temporary_checkpoint_path(const std::filesystem::path& directory,
                                                std::int64_t step, long writer_pid);

// Creates DIR (if needed) and a fresh temporary_checkpoint_path, after removing what killed
// writers left; returns the temporary's path.
std::filesystem::path create_temporary_checkpoint(const std::filesystem::path& directory,
                                                  std::int64_t step, long writer_pid);

// Writes `state_json` as the temporary's state.json and renames the temporary to
// DIR/step_<step> (replacing an older checkpoint of that step); returns the final path. The
// temporary is removed if the rename fails.
std::filesystem::path commit_checkpoint(const std::filesystem::path& directory,
                                        const std::filesystem::path& temporary, std::int64_t step,
                                        const std::string& state_json);

// Removes DIR/.step_*.tmp.PID directories whose writing process no longer runs (killed while
// writing); a live writer's temporary is left alone.
void remove_abandoned_checkpoints(const std::filesystem::path& directory);

// Every complete checkpoint in `directory` (DIR/step_N, any number of digits), by step.
std::vector<std::pair<std::int64_t, std::filesystem::path>> checkpoints_in(
    const std::filesystem::path& directory);

// The complete checkpoint with the highest step in `directory`, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& directory);

}  // namespace strata::executor
