// `strata presets`: the built-in models and clusters with their key numbers, or one preset's
// full document with --show (a starting point for a file of one's own).
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "presets_report.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/presets.h"
#include "text_format.h"

namespace strata::tools {
namespace {

using schemas::ClusterConfig;
using schemas::Dtype;
using schemas::ModelConfig;

std::string tier_summary(const ClusterConfig& cluster) {
  std::string text;
  for (const schemas::NetworkTier& tier : cluster.network_tiers) {
    if (!text.empty()) text += ", ";
    const bool spans_all = &tier == &cluster.network_tiers.back();
    text += fmt::format("{} {:g} GB/s ({})", tier.name, tier.bandwidth_gb_per_s,
                        spans_all ? std::string("all") : fmt::format("{} GPUs", tier.scope_gpus));
  }
  return text;
}

std::string peak_summary(const ClusterConfig& cluster) {
  std::string text;
  for (const auto& [dtype, tflops] : cluster.gpu.peak_dense_tflops) {
    if (!text.empty()) text += " ";
    text += fmt::format("{}={:g}", schemas::name_of(dtype, schemas::kDtypeNames), tflops);
  }
  return text;
}

// The document is JSON whatever --format says: it is meant to be saved and edited.
int show_preset(const std::string& spec) {
  std::cout << preset_document(spec).dump(2) << "\n";
  return 0;
}

}  // namespace

CLI::App* add_presets_command(CLI::App& app, PresetsOptions& options) {
  CLI::App* command = app.add_subcommand("presets",
                                         "List the built-in models and clusters (use NAME:NODES or "
                                         "NAME:NODESxGPUS for a cluster's size)");
  command
      ->add_option("--show", options.show,
                   "Print one preset as a complete model or cluster file, e.g. --show "
                   "llama3.1-8b or --show dgx-h100:16")
      ->option_text("NAME");
  add_format_option(command, options.format);
  return command;
}

int run_presets(const PresetsOptions& options) {
  if (options.show) return show_preset(*options.show);

  std::vector<ModelConfig> models;
  for (std::string_view name : schemas::model_preset_names())
    models.push_back(schemas::model_preset(name));
  std::vector<ClusterConfig> clusters;
  for (std::string_view name : schemas::cluster_preset_names()) {
    clusters.push_back(schemas::cluster_preset(name));
  }

  if (options.format == OutputFormat::json) {
    std::cout << presets_report().dump(2) << "\n";
    return 0;
  }

  TextTable model_table({"name", "arch", "parameters", "active", "experts", "layers", "hidden",
                         "ffn", "heads", "kv", "vocab", "max seq"},
                        {false, false, true, true, true, true, true, true, true, true, true, true});
  for (const ModelConfig& model : models) {
    const costmodels::ParameterBreakdown count = costmodels::count_parameters(model);
    // "routed/top-k", "+shared" when a mixture has shared experts; "-" for a dense model.
    const std::string experts =
        model.moe ? fmt::format("{}/{}{}", model.moe->num_experts, model.moe->experts_per_token,
                                model.moe->num_shared_experts > 0
                                    ? fmt::format("+{}", model.moe->num_shared_experts)
                                    : "")
                  : "-";
    model_table.add_row(
        {model.name, std::string(schemas::name_of(model.architecture, schemas::kArchitectureNames)),
         group_thousands(count.total()), model.moe ? group_thousands(count.active()) : "-", experts,
         std::to_string(model.num_layers), std::to_string(model.hidden_size),
         std::to_string(model.ffn_hidden_size), std::to_string(model.num_attention_heads),
         std::to_string(model.num_kv_heads), std::to_string(model.vocab_size),
         std::to_string(model.max_seq_length)});
  }
  TextTable cluster_table({"name", "gpu", "gpus/node", "memory", "peak dense TFLOP/s", "HBM GB/s",
                           "network per GPU per direction"},
                          {false, false, true, true, false, true, false});
  for (const ClusterConfig& cluster : clusters) {
    cluster_table.add_row(
        {cluster.name, cluster.gpu.name, std::to_string(cluster.gpus_per_node),
         format_gib(static_cast<double>(cluster.gpu.memory_bytes)), peak_summary(cluster),
         fmt::format("{:g}", cluster.gpu.hbm_bandwidth_gb_per_s), tier_summary(cluster)});
  }
  std::cout << "Models (--model NAME)\n"
            << model_table.render()
            << "\nClusters (--cluster NAME:NODES, e.g. dgx-h100:16; NAME:NODESxGPUS for part of "
               "each node, "
               "e.g. dgx-h100:1x2; NAME alone is one node)\n"
            << cluster_table.render();
  return 0;
}

}  // namespace strata::tools
