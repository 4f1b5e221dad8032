// Writing and verifying a checkpoint's state.json (checkpoint_state.h says what it records).
// Private to checkpoint/: the one-device, sharded and resharding readers and writers share it.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/executor/checkpoint/checkpoint_state.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// The state.json of a checkpoint holding `files` (name -> {"bytes", "crc32"}), signed with its
// own CRC-32. `parallel` null: one device's checkpoint, whose parameter layout is `parameters`'
// own; otherwise the "parallel" block, and the layout is the whole model's, whatever part of it
// the writing rank holds.
nlohmann::json state_document(const schemas::ModelConfig& model, const ParameterStore& parameters,
                              const TrainingState& state, nlohmann::json files,
                              nlohmann::json parallel);

// state.json of a checkpoint after the checks every reader makes (checkpoint_state_check.h):
// format, version, its own CRC-32, types and ranges; the step against the directory's name; the
// model and the parameter layout (of `parameters`, or the whole model's when `parallel`); the
// recorded files against the parallel layout.
nlohmann::json verified_state(const std::filesystem::path& checkpoint,
                              const schemas::ModelConfig& model, const ParameterStore& parameters,
                              bool parallel);

TrainingState training_state_of(const nlohmann::json& state);

// Runs `read` (a reader of `checkpoint`), turning a JSON type error that escaped the checks into
// one line naming its state.json.
template <typename Read>
auto reading_checkpoint_state(const std::filesystem::path& checkpoint, Read&& read) {
  try {
    return read();
  } catch (const nlohmann::json::exception& error) {
    throw schemas::InputError((checkpoint / "state.json").string(), "",
                              std::string("malformed checkpoint state: ") + error.what());
  }
}

}  // namespace strata::executor
