#include "strata/schemas/plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace strata::schemas {

bool recomputes_module(const RecomputeConfig& recompute, RecomputeModule module) {
  if (recompute.granularity != RecomputeGranularity::selective) return false;
  if (recompute.modules.empty()) return module == RecomputeModule::core_attn;
  return std::find(recompute.modules.begin(), recompute.modules.end(), module) !=
         recompute.modules.end();
}

std::int64_t Mesh::size_of(MeshAxis axis) const {
  switch (axis) {
    case MeshAxis::tp:
      return tp;
    case MeshAxis::cp:
      return cp;
    case MeshAxis::dp:
      return dp;
    case MeshAxis::pp:
      return pp;
  }
  return 1;
}

std::string mesh_order_to_string(const std::array<MeshAxis, 4>& order) {
  std::string text;
  for (MeshAxis axis : order) {
    if (!text.empty()) text += '-';
    text += name_of(axis, kMeshAxisNames);
  }
  return text;
}

std::vector<PipelineStage> even_pipeline_stages(std::int64_t num_layers, std::int64_t num_stages,
                                                bool embedding_as_layer, bool loss_as_layer) {
  const std::int64_t slots = num_layers + (embedding_as_layer ? 1 : 0) + (loss_as_layer ? 1 : 0);
  std::vector<PipelineStage> stages;
  std::int64_t next_layer = 0;
  for (std::int64_t s = 0; s < num_stages; ++s) {
    std::int64_t layers = slots / num_stages + (s < slots % num_stages ? 1 : 0);
    if (s == 0 && embedding_as_layer) layers -= 1;
    if (s + 1 == num_stages && loss_as_layer) layers -= 1;
    layers = std::max<std::int64_t>(0, layers);
    stages.push_back({next_layer, layers, s == 0, s + 1 == num_stages});
    next_layer += layers;
  }
  return stages;
}

std::string plan_content_hash(const ModelConfig& model, const ClusterConfig& cluster) {
  // FNV-1a: a stable, dependency-free fingerprint for spotting edits, not a security measure.
  const std::string canonical =
      model_to_json(model).dump() + "\n" + cluster_to_json(cluster).dump();
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : canonical) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return fmt::format("fnv1a64:{:016x}", hash);
}

}  // namespace strata::schemas
