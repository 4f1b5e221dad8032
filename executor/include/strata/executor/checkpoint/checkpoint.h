// Training checkpoints: the model's parameters, AdamW's moments, the step, the seed (which with
// the step fixes the data position and every dropout mask) and the model they belong to. Used by
// the training loop for --checkpoint-dir, --checkpoint-every and --resume.
//
//   DIR/step_00000100/state.json     step, seed, tokens seen, the run it belongs to (batch,
//                                    precision, data file), model, parameter layout, per file its
//                                    size and CRC-32, and its own CRC-32 (state_crc32)
//   DIR/step_00000100/model.bin      parameters, flat, in ParameterStore order (float32)
//   DIR/step_00000100/optimizer.bin  AdamW first moments, then second moments
//
// A parallel run writes its own files (sharded_checkpoint.h); a checkpoint of one layout loads
// into another (checkpoint_resharding.h). The pieces:
//   checkpoint_state.h      what state.json records (step, seed, run identity, layout)
//   checkpoint_directory.h  temporaries, the atomic rename, finding the latest checkpoint
//   checkpoint_files.h      (private) tensor files checked for size and CRC-32 before use
//   this header             one device's model.bin and optimizer.bin
#pragma once

#include <filesystem>

#include "strata/executor/checkpoint/checkpoint_state.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// Writes DIR/step_<step> atomically and returns its path.
std::filesystem::path write_checkpoint(const std::filesystem::path& directory,
                                       const schemas::ModelConfig& model,
                                       const ParameterStore& parameters,
                                       const OptimizerMoments& moments, const TrainingState& state);

// Loads a checkpoint into `parameters` and `moments`, refusing (schemas::InputError naming the
// file and the reason) a missing file, a size or CRC-32 that differs from state.json (truncated
// or corrupted), a state.json whose own CRC-32 or step (against the directory's name) is off
// (edited), and a model or parameter layout that differs from `model`'s. A parallel run's
// checkpoint is gathered into the one device's state (read_resharded_checkpoint).
TrainingState read_checkpoint(const std::filesystem::path& checkpoint,
                              const schemas::ModelConfig& model, ParameterStore& parameters,
                              OptimizerMoments& moments);

// The parameter values alone of a checkpoint of any layout, into one device's store (no AdamW
// moments read or held), with read_checkpoint's checks.
TrainingState read_checkpoint_values(const std::filesystem::path& checkpoint,
                                     const schemas::ModelConfig& model, ParameterStore& parameters);

}  // namespace strata::executor
