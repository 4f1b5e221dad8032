// StateLayout: what fixes where every element of a run's model state lives — the mesh (with its
// hybrid shards and expert axes), the ZeRO stage, the gradient bucket size and the pipeline
// stages. Two runs with equal state layouts hold every element on the same ranks at the same
// offsets. It is the typed form of a checkpoint's "parallel" block: JSON only where a checkpoint
// is written or read (to_json, state_layout_from_json); a layout switch and its pricing work on
// this struct. A plan of one rank has no parallel layout (std::nullopt): its state is the whole
// model in store order at any ZeRO stage, one device's format.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "strata/schemas/plan.h"

namespace strata::layout {

// The mesh keeps what places state: its vpp is 1 (the stages say it) and its dp_shard 0 when
// ZeRO shards over all of dp, so that equal layouts compare equal.
struct StateLayout {
  schemas::Mesh mesh;
  std::int64_t zero_stage = 0;
  std::int64_t bucket_elements = 1;
  // With a pipeline, every stage of the plan (stage s on pipeline rank s mod pp); empty without.
  std::vector<schemas::PipelineStage> stages;
  bool operator==(const StateLayout&) const = default;
};

// The layout a run of `plan` keeps its state in; nullopt for a plan of one rank.
std::optional<StateLayout> state_layout_of(const schemas::Plan& plan);

// The stages pipeline rank `pp_rank` holds, in order (all of the model without a pipeline).
std::vector<schemas::PipelineStage> rank_stages(const StateLayout& layout,
                                                const schemas::ModelConfig& model,
                                                std::int64_t pp_rank);

// The checkpoint's "parallel" block: {"mesh": {tp, cp, dp, pp, order[, dp_shard][, ep][, etp]},
// "zero_stage", "bucket_elements"[, "stages": [[first_layer, num_layers, embedding, lm_head]…]]};
// null for nullopt. state_layout_from_json reads what to_json wrote (a checkpoint's block has been
// validated against the run's plan before it is read here).
nlohmann::json to_json(const std::optional<StateLayout>& layout);
std::optional<StateLayout> state_layout_from_json(const nlohmann::json& parallel);
// The block's "mesh" alone, as written (dp_shard 0 where absent).
schemas::Mesh mesh_from_json(const nlohmann::json& mesh_json);

}  // namespace strata::layout
