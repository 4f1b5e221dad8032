// The rules a checkpoint's state.json meets before any reader trusts a number in it (docs/
// training-one-device.md, "Checkpoints"): its format and a version this build reads, its own CRC-32
// whenever it carries one (whatever version it claims: an edited version number cannot switch the
// check off), every field's type and range, and a parallel layout that is one a plan could have
// (the mesh against the model, the pipeline stages) and that names exactly the files the checkpoint
// lists, each of the size the layout implies. A reader that applies them never reads past a file,
// never loops over a forged rank count and never fails with an internal error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/schemas/model_config.h"

namespace strata::executor {

inline constexpr const char* kCheckpointFormat = "strata-checkpoint";
// 2 adds the run identity and state.json's own CRC-32; version 1 checkpoints are still read.
inline constexpr int kCheckpointVersion = 2;
inline constexpr const char* kCheckpointStateChecksumKey = "state_crc32";

// The CRC-32 (8 hex digits) of a state document without its own checksum field, as written.
std::string checkpoint_state_checksum(nlohmann::json document);

// Everything that needs no model: format, version, checksum, types and ranges, the parallel
// block's shape. `source` names state.json in messages. Throws schemas::InputError.
void check_checkpoint_state(const nlohmann::json& state, const std::string& source);

// The parallel layout against the model (tp against heads and MLP, pp against layers, the
// stages) and the files it implies against the files state.json lists, in number, names and
// bytes. Only for a state that passed check_checkpoint_state.
void check_checkpoint_layout(const nlohmann::json& state, const schemas::ModelConfig& model,
                             const std::string& source);

}  // namespace strata::executor
