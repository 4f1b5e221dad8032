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
// A checkpoint is written under DIR/.step_00000100.tmp.PID and renamed when complete, so a crash
// leaves either the previous checkpoint or the new one, never half of one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// What a resumed run must share with the run that wrote the checkpoint for its steps to continue
// it: the same batches (global batch, sequence length, data file) at the same precision. The
// machine may differ (a GPU run resumes on the CPU).
struct RunIdentity {
  std::int64_t global_batch_size = 0;
  std::int64_t seq_length = 0;
  std::string precision;         // the plan's, "fp32" or "bf16"
  std::int64_t data_tokens = 0;  // tokens in the data file
  std::string data_crc32;        // of the data file's tokens
  std::string data_file;         // where it was read (informational: the file may move)
  std::string plan_hash;         // the plan's content hash (informational)
  bool operator==(const RunIdentity&) const = default;
};

struct TrainingState {
  std::int64_t step = 0;  // optimizer steps completed; the next step's data and dropout follow
  std::uint64_t seed = 0;
  std::int64_t tokens_seen = 0;
  std::optional<RunIdentity> run;  // absent in version 1 checkpoints
};

// Writes DIR/step_<step> atomically and returns its path.
std::filesystem::path write_checkpoint(const std::filesystem::path& directory,
                                       const schemas::ModelConfig& model,
                                       const ParameterStore& parameters,
                                       const OptimizerMoments& moments, const TrainingState& state);

// Removes DIR/.step_*.tmp.PID directories whose writing process no longer runs (killed while
// writing); a live writer's temporary is left alone.
void remove_abandoned_checkpoints(const std::filesystem::path& directory);

// The complete checkpoint with the highest step in `directory`, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& directory);

// Loads a checkpoint into `parameters` and `moments`, refusing (schemas::InputError naming the
// file and the reason) a missing file, a size or CRC-32 that differs from state.json (truncated
// or corrupted), a state.json whose own CRC-32 or step (against the directory's name) is off
// (edited), and a model or parameter layout that differs from `model`'s.
TrainingState read_checkpoint(const std::filesystem::path& checkpoint,
                              const schemas::ModelConfig& model, ParameterStore& parameters,
                              OptimizerMoments& moments);

}  // namespace strata::executor
