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
//
// A parallel run (more than one rank) writes the same state.json — plus a "parallel" block: the
// mesh, the ZeRO stage and the bucket size, which fix what each rank holds — and, instead of
// model.bin and optimizer.bin, one file per distinct piece of state, written by the lowest rank
// that holds it:
//   DIR/step_00000100/model.tp1.pp0.dp0.bin      tp rank 1's values (every dp rank holds them
//                                                below ZeRO-3: dp rank 0 writes them)
//   DIR/step_00000100/optimizer.tp1.pp0.dp3.bin  dp rank 3's share of the moments (ZeRO ≥ 1)
// All ranks write into one temporary directory (named by rank 0's PID), rank 0 adds state.json
// listing every file's size and CRC-32 once all are written, then renames it. The directory must
// be on a file system every rank sees. A checkpoint of one layout loads into another (a resume on
// another plan, or strata reshard): every element of the files the new layout's rank would hold is
// read from the file of the old layout that holds it (checkpoint_layout.h maps both).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// What a resumed run must share with the run that wrote the checkpoint for its steps to continue
// it: the same batches (global batch, sequence length, data file and the order it is read in) at
// the same precision. The machine may differ (a GPU run resumes on the CPU).
struct RunIdentity {
  std::int64_t global_batch_size = 0;
  std::int64_t seq_length = 0;
  std::string precision;         // the plan's, "fp32" or "bf16"
  std::int64_t data_tokens = 0;  // tokens in the data file
  std::string data_crc32;        // of the data file's tokens
  std::string data_file;         // where it was read (informational: the file may move)
  std::string plan_hash;         // the plan's content hash (informational)
  // --data-order's name; checkpoints written before the option existed read as "random".
  std::string data_order = "random";
  bool operator==(const RunIdentity&) const = default;
};

struct TrainingState {
  std::int64_t step = 0;  // optimizer steps completed; the next step's data and dropout follow
  std::uint64_t seed = 0;
  std::int64_t tokens_seen = 0;
  std::optional<RunIdentity> run;  // absent in version 1 checkpoints
  // Which run wrote it: 16 hex digits drawn when a run starts, kept by every run that resumes it
  // (empty in checkpoints written before run ids).
  std::string run_id;
};

// A fresh run id: 16 hex digits from the system's random source.
std::string new_run_id();

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

// Every complete checkpoint in `directory` (DIR/step_N, any number of digits), by step.
std::vector<std::pair<std::int64_t, std::filesystem::path>> checkpoints_in(
    const std::filesystem::path& directory);

// Loads a checkpoint into `parameters` and `moments`, refusing (schemas::InputError naming the
// file and the reason) a missing file, a size or CRC-32 that differs from state.json (truncated
// or corrupted), a state.json whose own CRC-32 or step (against the directory's name) is off
// (edited), and a model or parameter layout that differs from `model`'s. A parallel run's
// checkpoint is gathered into the one device's state (read_resharded_checkpoint).
TrainingState read_checkpoint(const std::filesystem::path& checkpoint,
                              const schemas::ModelConfig& model, ParameterStore& parameters,
                              OptimizerMoments& moments);

// The model a checkpoint was written for (its state.json's "model"), refusing a directory that is
// not a checkpoint and a malformed model. What `strata sample --checkpoint` builds.
schemas::ModelConfig read_checkpoint_model(const std::filesystem::path& checkpoint);
// The parameter values alone of a checkpoint of any layout, into one device's store (no AdamW
// moments read or held), with read_checkpoint's checks.
TrainingState read_checkpoint_values(const std::filesystem::path& checkpoint,
                                     const schemas::ModelConfig& model, ParameterStore& parameters);

// One rank's part of a run's checkpoint: its state tensors (in file order, on any device) and
// whether it is the rank that writes each piece. A run of one rank is the part of a null layout:
// model.bin and optimizer.bin, one device's files.
struct ShardedCheckpointPart {
  nlohmann::json layout;  // the "parallel" block of the run reading or writing it (null: one rank)
  std::int64_t rank = 0;  // in the world of that layout
  std::vector<Tensor> values;
  std::vector<Tensor> moments;
  std::string values_file;   // e.g. "model.tp1.pp0.dp0.bin"
  std::string moments_file;  // e.g. "optimizer.tp1.pp0.dp3.bin"
  bool writes_values = false;
  bool writes_moments = false;
};

// The files and writers of `rank` in a checkpoint of a mesh at a ZeRO stage: values per (tp, pp)
// slice, and per dp rank at ZeRO-3; moments likewise per dp rank from ZeRO-1 on.
ShardedCheckpointPart sharded_checkpoint_files(const nlohmann::json& mesh, std::int64_t zero_stage,
                                               std::int64_t rank);
// The files and writers of `rank` under a "parallel" block (null: one rank, one device's files),
// with the block recorded in the part.
ShardedCheckpointPart checkpoint_part_of(const nlohmann::json& layout, std::int64_t rank);

// Collective over `world`: writes DIR/step_<step> of a run atomically (of one rank: one device's
// format); returns its path on every rank. `parameters` gives the parameter layout (names and whole
// shapes) for state.json.
std::filesystem::path write_sharded_checkpoint(const std::filesystem::path& directory,
                                               const schemas::ModelConfig& model,
                                               const ParameterStore& parameters,
                                               const ShardedCheckpointPart& part,
                                               const TrainingState& state, Communicator& world);

// Loads this rank's part of a parallel checkpoint into part.values and part.moments, refusing
// what read_checkpoint refuses. A checkpoint of another layout (or of one device) is resharded on
// the way in (read_resharded_checkpoint).
TrainingState read_sharded_checkpoint(const std::filesystem::path& checkpoint,
                                      const schemas::ModelConfig& model,
                                      const ParameterStore& parameters,
                                      ShardedCheckpointPart& part);

// The "parallel" block a checkpoint records (null: written by one device), and the text naming it
// in messages ("tp 2 · cp 1 · dp 2 · pp 1 (tp-cp-dp-pp), ZeRO-1, buckets of 4096", "one device").
nlohmann::json recorded_checkpoint_layout(const std::filesystem::path& checkpoint);
std::string checkpoint_layout_text(const nlohmann::json& parallel);

// Loads `rank`'s part of the layout `target` (a "parallel" block; null: one device) from a
// checkpoint written by any layout of the same model: `values` and `moments` are the rank's state
// tensors in file order (as read_checkpoint and read_sharded_checkpoint fill them). Each element is
// read from a source file that holds it; only the files this rank needs are read, each checked for
// size and CRC-32 first, so ranks load in parallel with one file's worth of memory each. Refuses
// what read_checkpoint refuses and elements no source file holds.
TrainingState read_resharded_checkpoint(const std::filesystem::path& checkpoint,
                                        const schemas::ModelConfig& model,
                                        const nlohmann::json& target, std::int64_t rank,
                                        const std::vector<Tensor*>& values,
                                        const std::vector<Tensor*>& moments);

// Writes the checkpoint at `source` (one device's or a parallel run's) as a checkpoint of another
// layout into `directory`/step_N: `target` is the "parallel" block of the layout to write (mesh,
// stages, ZeRO stage, bucket size; null: one device). Values and AdamW moments move element by
// element through both layouts' maps (checkpoint_layout.h), one target file in memory at a time;
// every source file's size and CRC-32 are checked first. Returns the new checkpoint's path.
std::filesystem::path reshard_checkpoint(const std::filesystem::path& source,
                                         const schemas::ModelConfig& model,
                                         const nlohmann::json& target,
                                         const std::filesystem::path& directory);

}  // namespace strata::executor
