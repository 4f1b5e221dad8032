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
bool is_cluster_preset_spec(std::string_view spec);  // "NAME" or "NAME:NODES"

// The preset's document as stored (with its "$schema" and "description"), for export and tests.
std::string_view model_preset_document(std::string_view name);
std::string_view cluster_preset_document(std::string_view name);

// Fails with a "did you mean" suggestion for an unknown name.
ModelConfig model_preset(std::string_view name);
// "dgx-h100" is one node; "dgx-h100:16" is 16 nodes, with the outermost network tier stretched
// to connect all of them.
ClusterConfig cluster_preset(std::string_view spec);

}  // namespace strata::schemas
