// What `strata presets --format json` prints — each built-in model and cluster with its key
// numbers — and one preset's full document (--show). Shared by the command and the Python module.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace strata::tools {

// {"models": [...], "clusters": [...]}.
nlohmann::json presets_report();
// The complete model or cluster document of a preset name (a cluster as NAME, NAME:NODES or
// NAME:NODESxGPUS); an unknown name throws schemas::InputError with a suggestion.
nlohmann::json preset_document(const std::string& spec);

}  // namespace strata::tools
