#include "strata/layout/state_layout.h"

#include <string>

#include "layout_check.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/schemas/enum_names.h"

namespace strata::layout {

std::optional<StateLayout> state_layout_of(const schemas::Plan& plan) {
  if (plan.mesh.world_size() == 1) return std::nullopt;
  StateLayout layout;
  layout.mesh = plan.mesh;
  layout.mesh.vpp = 1;
  if (layout.mesh.zero_shard_dp() == layout.mesh.dp) layout.mesh.dp_shard = 0;
  layout.zero_stage = plan.zero_stage;
  layout.bucket_elements = gradient_bucket_elements(plan);
  if (plan.mesh.pp > 1) layout.stages = plan.stages;
  return layout;
}

std::vector<schemas::PipelineStage> rank_stages(const StateLayout& layout,
                                                const schemas::ModelConfig& model,
                                                std::int64_t pp_rank) {
  if (layout.stages.empty()) return {{0, model.num_layers, true, true}};
  std::vector<schemas::PipelineStage> stages;
  for (std::size_t s = static_cast<std::size_t>(pp_rank); s < layout.stages.size();
       s += static_cast<std::size_t>(layout.mesh.pp)) {
    stages.push_back(layout.stages[s]);
  }
  return stages;
}

nlohmann::json to_json(const std::optional<StateLayout>& layout) {
  if (!layout) return nlohmann::json();
  const schemas::Mesh& mesh = layout->mesh;
  nlohmann::json parallel{{"mesh",
                           {{"tp", mesh.tp},
                            {"cp", mesh.cp},
                            {"dp", mesh.dp},
                            {"pp", mesh.pp},
                            {"order", schemas::mesh_order_to_string(mesh.order)}}},
                          {"zero_stage", layout->zero_stage},
                          {"bucket_elements", layout->bucket_elements}};
  // Hybrid sharding fixes how many shards there are and which ranks hold each.
  if (mesh.dp_shard > 0) parallel["mesh"]["dp_shard"] = mesh.dp_shard;
  // Expert (tensor) parallelism fixes which routed experts, and which part of their width, each
  // rank holds.
  if (mesh.ep > 1) parallel["mesh"]["ep"] = mesh.ep;
  if (mesh.etp > 1) parallel["mesh"]["etp"] = mesh.etp;
  if (!layout->stages.empty()) {
    // The pipeline split fixes which parameters each pipeline rank holds.
    nlohmann::json stages = nlohmann::json::array();
    for (const schemas::PipelineStage& stage : layout->stages) {
      stages.push_back({stage.first_layer, stage.num_layers, stage.embedding, stage.lm_head});
    }
    parallel["stages"] = std::move(stages);
  }
  return parallel;
}

schemas::Mesh mesh_from_json(const nlohmann::json& mesh_json) {
  schemas::Mesh mesh;
  mesh.tp = mesh_json.at("tp").get<std::int64_t>();
  mesh.cp = mesh_json.at("cp").get<std::int64_t>();
  mesh.dp = mesh_json.at("dp").get<std::int64_t>();
  mesh.pp = mesh_json.at("pp").get<std::int64_t>();
  mesh.dp_shard = mesh_json.value("dp_shard", std::int64_t{0});
  mesh.ep = mesh_json.value("ep", std::int64_t{1});
  mesh.etp = mesh_json.value("etp", std::int64_t{1});
  const std::string order = mesh_json.at("order").get<std::string>();
  STRATA_LAYOUT_CHECK(order.size() == 11, "mesh order '{}'", order);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto axis = schemas::value_of(order.substr(3 * i, 2), schemas::kMeshAxisNames);
    STRATA_LAYOUT_CHECK(axis.has_value(), "mesh order '{}'", order);
    mesh.order[i] = *axis;
  }
  return mesh;
}

std::optional<StateLayout> state_layout_from_json(const nlohmann::json& parallel) {
  if (parallel.is_null()) return std::nullopt;
  StateLayout layout;
  layout.mesh = mesh_from_json(parallel.at("mesh"));
  if (layout.mesh.dp_shard == layout.mesh.dp) layout.mesh.dp_shard = 0;
  layout.zero_stage = parallel.at("zero_stage").get<std::int64_t>();
  layout.bucket_elements = parallel.at("bucket_elements").get<std::int64_t>();
  if (parallel.contains("stages")) {
    for (const nlohmann::json& stage : parallel.at("stages")) {
      layout.stages.push_back({stage.at(0).get<std::int64_t>(), stage.at(1).get<std::int64_t>(),
                               stage.at(2).get<bool>(), stage.at(3).get<bool>()});
    }
  }
  return layout;
}

}  // namespace strata::layout
