// What a checkpoint's state.json records besides its files: the step, the seed (which with the
// step fixes the data position and every dropout mask), the tokens seen, the run it belongs to,
// the model and, for a parallel run, the layout that fixes what each rank holds. The rules a
// state.json meets before it is trusted are in checkpoint_state_check.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "strata/layout/state_layout.h"
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

// The model a checkpoint was written for (its state.json's "model"), refusing a directory that is
// not a checkpoint and a malformed model. What `strata sample --checkpoint` builds.
schemas::ModelConfig read_checkpoint_model(const std::filesystem::path& checkpoint);

// The state layout a checkpoint records as its "parallel" block (none: written by one device), its
// state.json checked first, and the text naming a layout in messages ("tp 2 · cp 1 · dp 2 · pp 1
// (tp-cp-dp-pp), ZeRO-1, buckets of 4096", "one device").
std::optional<layout::StateLayout> recorded_checkpoint_layout(
    const std::filesystem::path& checkpoint);
std::string checkpoint_layout_text(const std::optional<layout::StateLayout>& state_layout);

}  // namespace strata::executor
