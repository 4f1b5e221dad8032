// A run's checkpoint written and read by all its ranks together. It holds the same state.json as
// one device's (checkpoint.h) plus a "parallel" block — the mesh, the ZeRO stage and the bucket
// size, which fix what each rank holds — and, instead of model.bin and optimizer.bin, one file per
// distinct piece of state, written by the lowest rank that holds it:
//   DIR/step_00000100/model.tp1.pp0.dp0.bin      tp rank 1's values (every dp rank holds them
//                                                below ZeRO-3: dp rank 0 writes them)
//   DIR/step_00000100/optimizer.tp1.pp0.dp3.bin  dp rank 3's share of the moments (ZeRO ≥ 1)
// With expert parallelism a file also holds the rank's routed experts and is named by them too:
//   DIR/step_00000100/model.tp0.pp0.ep1.bin            experts of ep rank 1 with the dense state
//   DIR/step_00000100/optimizer.tp0.pp0.ep1.dp2.edp0.bin  dense shard 2 and expert shard 0
// A name is everything the file's contents follow from, so no two ranks that hold different
// bytes ever write one file (every mesh order, cp, hybrid sharding: a property test checks it).
// All ranks write into one temporary directory (named by rank 0's PID), rank 0 adds state.json
// listing every file's size and CRC-32 once all are written, then renames it. The directory must
// be on a file system every rank sees. A run of one rank writes one device's files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "strata/executor/checkpoint/checkpoint_state.h"
#include "strata/executor/distributed/communicator.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/layout/state_layout.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// One rank's part of a run's checkpoint: its state tensors (in file order, on any device) and
// whether it is the rank that writes each piece. A run of one rank is the part of no layout:
// model.bin and optimizer.bin, one device's files.
struct ShardedCheckpointPart {
  // The state layout of the run reading or writing it (none: one rank); state.json records it as
  // its "parallel" block.
  std::optional<layout::StateLayout> layout;
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
ShardedCheckpointPart sharded_checkpoint_files(const schemas::Mesh& mesh, std::int64_t zero_stage,
                                               std::int64_t rank);
// The files and writers of `rank` under a state layout (none: one rank, one device's files), with
// the layout recorded in the part.
ShardedCheckpointPart checkpoint_part_of(const std::optional<layout::StateLayout>& state_layout,
                                         std::int64_t rank);

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

}  // namespace strata::executor
