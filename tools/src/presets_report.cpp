#include "presets_report.h"

#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/enum_names.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/presets.h"

namespace strata::tools {
namespace {

using schemas::ClusterConfig;
using schemas::ModelConfig;

nlohmann::json model_summary_json(const ModelConfig& model) {
  return {{"name", model.name},
          {"architecture", schemas::name_of(model.architecture, schemas::kArchitectureNames)},
          {"parameters", costmodels::count_parameters(model).total()},
          {"active_parameters", costmodels::count_parameters(model).active()},
          {"num_layers", model.num_layers},
          {"hidden_size", model.hidden_size},
          {"num_attention_heads", model.num_attention_heads},
          {"num_kv_heads", model.num_kv_heads},
          {"vocab_size", model.vocab_size},
          {"max_seq_length", model.max_seq_length}};
}

nlohmann::json cluster_summary_json(const ClusterConfig& cluster) {
  nlohmann::json peaks = nlohmann::json::object();
  for (const auto& [dtype, tflops] : cluster.gpu.peak_dense_tflops) {
    peaks[std::string(schemas::name_of(dtype, schemas::kDtypeNames))] = tflops;
  }
  nlohmann::json tiers = nlohmann::json::array();
  for (const schemas::NetworkTier& tier : cluster.network_tiers) {
    tiers.push_back({{"name", tier.name}, {"bandwidth_gb_per_s", tier.bandwidth_gb_per_s}});
  }
  return {{"name", cluster.name},
          {"gpu", cluster.gpu.name},
          {"gpus_per_node", cluster.gpus_per_node},
          {"gpu_memory_bytes", cluster.gpu.memory_bytes},
          {"peak_dense_tflops", peaks},
          {"hbm_bandwidth_gb_per_s", cluster.gpu.hbm_bandwidth_gb_per_s},
          {"network_tiers", tiers}};
}

}  // namespace

nlohmann::json presets_report() {
  nlohmann::json report = {{"models", nlohmann::json::array()},
                           {"clusters", nlohmann::json::array()}};
  for (std::string_view name : schemas::model_preset_names()) {
    report["models"].push_back(model_summary_json(schemas::model_preset(name)));
  }
  for (std::string_view name : schemas::cluster_preset_names()) {
    report["clusters"].push_back(cluster_summary_json(schemas::cluster_preset(name)));
  }
  return report;
}

nlohmann::json preset_document(const std::string& spec) {
  if (schemas::is_model_preset(spec)) return schemas::model_to_json(schemas::model_preset(spec));
  // An unknown name fails here with a suggestion among the cluster presets.
  return schemas::cluster_to_json(schemas::cluster_preset(spec));
}

}  // namespace strata::tools
