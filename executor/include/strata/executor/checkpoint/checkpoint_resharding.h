// A checkpoint of one layout loaded into another: a resume on another plan, or `strata reshard`.
// Every element of the files the new layout's rank would hold is read from the file of the old
// layout that holds it; checkpoint_layout.h maps both layouts' files to the whole model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "strata/executor/checkpoint/checkpoint_state.h"
#include "strata/executor/tensor/tensor.h"
#include "strata/layout/state_layout.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// Loads `rank`'s part of the state layout `target` (none: one device) from a
// checkpoint written by any layout of the same model: `values` and `moments` are the rank's state
// tensors in file order (as read_checkpoint and read_sharded_checkpoint fill them; `moments` empty:
// the values alone). Each element is read from a source file that holds it; only the files this
// rank needs are read, each checked for size and CRC-32 first, so ranks load in parallel with one
// file's worth of memory each. Refuses what read_checkpoint refuses and elements no source file
// holds.
TrainingState read_resharded_checkpoint(const std::filesystem::path& checkpoint,
                                        const schemas::ModelConfig& model,
                                        const std::optional<layout::StateLayout>& target,
                                        std::int64_t rank, const std::vector<Tensor*>& values,
                                        const std::vector<Tensor*>& moments);

// Writes the checkpoint at `source` (one device's or a parallel run's) as a checkpoint of another
// layout into `directory`/step_N: `target` is the state layout to write (mesh, stages, ZeRO
// stage, bucket size; none: one device). Values and AdamW moments move element by
// element through both layouts' maps (checkpoint_layout.h), one target file in memory at a time;
// every source file's size and CRC-32 are checked first. Returns the new checkpoint's path.
std::filesystem::path reshard_checkpoint(const std::filesystem::path& source,
                                         const schemas::ModelConfig& model,
                                         const std::optional<layout::StateLayout>& target,
                                         const std::filesystem::path& directory);

}  // namespace strata::executor
