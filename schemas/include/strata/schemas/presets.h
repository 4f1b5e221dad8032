// Built-in presets: models (GPT-2, the GPT-3 family, Llama 2/3.1, BLOOM) and clusters (DGX A100,
// H100, H200 and this machine's CPU executor), compiled into the binary from schemas/presets/.
// Used by tools/ and by tests and benchmarks that need realistic inputs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/model_config.h"

namespace strata::schemas {

std::vector<std::string_view> model_preset_names();
std::vector<std::string_view> cluster_preset_names();
bool is_model_preset(std::string_view name);
bool is_cluster_preset_spec(std::string_view spec);  // "NAME", "NAME:NODES", "NAME:NODESxGPUS"

// The preset's document as stored (with its "$schema" and "description"), for export and tests.
std::string_view model_preset_document(std::string_view name);
std::string_view cluster_preset_document(std::string_view name);

// Fails with a "did you mean" suggestion for an unknown name.
ModelConfig model_preset(std::string_view name);
// "dgx-h100" is one node; "dgx-h100:16" is 16 nodes, with the outermost network tier stretched
// to connect all of them; "dgx-h100:1x2" is 2 GPUs of one node and "dgx-h100:4x4" 4 GPUs on each
// of 4 nodes (a job given part of each node).
ClusterConfig cluster_preset(std::string_view spec);
// `cluster` with the node counts of a spec's suffix after ':' ("NODES" or "NODESxGPUS", as
// presets take them; `spec` names it in errors): a cluster file measured on two nodes, used as
// one (`strata profile` writes files that are then planned for with FILE:1x1).
ClusterConfig with_node_counts(ClusterConfig cluster, std::string_view spec,
                               std::string_view counts);

// The cluster using `gpus` (at most its gpus_per_node) GPUs of each node: tiers inside a node
// keep their per-GPU bandwidth and shrink to the GPUs used, tiers across nodes span as many nodes.
void use_gpus_per_node(ClusterConfig& cluster, std::int64_t gpus);

}  // namespace strata::schemas
