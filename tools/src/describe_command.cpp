// `strata describe`: what a model is made of and what it costs before any parallelism —
// parameters by component, FLOPs per token, model-state bytes per precision, and on a cluster
// the fewest GPUs that can hold the model states at all.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "commands.h"
#include "describe_report.h"
#include "strata/costmodels/model_flops.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/model_shrink.h"
#include "text_format.h"

namespace strata::tools {

using schemas::Dtype;

CLI::App* add_describe_command(CLI::App& app, DescribeOptions& options) {
  CLI::App* command = app.add_subcommand(
      "describe",
      "Parameters, FLOPs per token and model-state memory of a model (and on a cluster, "
      "the fewest GPUs that hold its states)");
  command->add_option("--model", options.model, "Model preset, model file or HF config.json")
      ->capture_default_str();
  command->add_option("--cluster", options.cluster,
                      "Cluster preset (NAME, NAME:NODES or NAME:NODESxGPUS) or file");
  command
      ->add_option("--seq-len", options.seq_length,
                   "Sequence length for attention FLOPs (default: the model's max_seq_length)")
      ->check(whole_number_from(1, schemas::kMaxSeqLength));
  command->add_option("--precision", options.precision, "Training precision for the GPU count")
      ->check(CLI::IsMember(choices_of(schemas::kDtypeNames)))
      ->capture_default_str();
  command->add_flag("--shrink", options.shrink,
                    "A tiny copy of the model with all its features (4 heads, hidden 32, 2 or 3 "
                    "layers, at most 8 experts): what tests train in seconds");
  command->add_option("--write-model", options.write_model,
                      "Also write the described model (shrunk with --shrink) as a model file");
  add_format_option(command, options.format);
  return command;
}

int run_describe(const DescribeOptions& options) {
  schemas::ModelConfig resolved = schemas::resolve_model(options.model);
  if (options.shrink) resolved = schemas::shrink_model(resolved);
  if (options.write_model) {
    schemas::write_file_atomically(*options.write_model,
                                   schemas::model_to_json(resolved).dump(2) + "\n");
  }
  const DescribedModel described = describe_model(
      std::move(resolved),
      options.cluster ? std::optional(schemas::resolve_cluster(*options.cluster)) : std::nullopt,
      options.precision, options.seq_length);
  if (options.format == OutputFormat::json) {
    std::cout << describe_report(described).dump(2) << "\n";
    return 0;
  }
  const schemas::ModelConfig& model = described.model;
  const std::optional<schemas::ClusterConfig>& cluster = described.cluster;
  const costmodels::ParameterBreakdown& count = described.count;
  const std::int64_t parameters = count.total();
  const costmodels::FlopsPerToken& flops = described.flops;
  const std::int64_t seq_length = described.seq_length;
  const std::int64_t state_bytes = described.state_bytes;
  const std::int64_t min_gpus = described.min_gpus;

  std::cout << fmt::format("Model {} ({}): {} parameters\n", model.name,
                           schemas::name_of(model.architecture, schemas::kArchitectureNames),
                           group_thousands(parameters));
  std::cout << fmt::format("Architecture: {}\n", fmt::join(model_features(model), ", "));
  // The same rule as the JSON report's "executor" (describe_report), asked directly.
  const std::optional<schemas::ExecutorRefusal> refusal = schemas::executor_model_refusal(model);
  std::cout << (refusal ? fmt::format("Strata's executor does not train it ({}: {}); it plans and "
                                      "simulates it\n",
                                      refusal->json_path, refusal->rule)
                        : std::string("Strata's executor trains it\n"));
  if (model.moe) {
    std::cout << fmt::format(
        "Mixture of experts: {} routed experts, {} per token{} on {} of {} layers: {} parameters "
        "active per token ({})\n",
        model.moe->num_experts, model.moe->experts_per_token,
        model.moe->num_shared_experts > 0
            ? fmt::format(", {} shared", model.moe->num_shared_experts)
            : "",
        count.num_moe_layers, count.num_layers, group_thousands(count.active()),
        format_percent(static_cast<double>(count.active()) / static_cast<double>(parameters)));
  }
  if (model.mtp) {
    std::cout << fmt::format(
        "Multi-token prediction: {} module{} after the main model (loss weight {}), {} "
        "parameters; {} with the embedding and head copies a Hugging Face checkpoint stores\n",
        model.mtp->num_modules, model.mtp->num_modules == 1 ? "" : "s", model.mtp->loss_weight,
        group_thousands(count.mtp()), group_thousands(count.mtp_with_copies()));
  }
  TextTable components({"component", "parameters", "share"}, {false, true, true});
  for (const Component& component : components_of(count)) {
    if (component.parameters == 0) continue;
    components.add_row({component.label, group_thousands(component.parameters),
                        format_percent(static_cast<double>(component.parameters) /
                                       static_cast<double>(parameters))});
  }
  std::cout << components.render();
  std::cout << fmt::format(
      "\nFLOPs per token at seq_length {}{}: forward {}, training (forward + backward) {}\n",
      seq_length, model.moe ? " (the router and the experts a token visits)" : "",
      format_flops(flops.forward), format_flops(flops.training()));

  std::cout << "\nModel states with Adam, unsharded (weights + gradients + optimizer state):\n";
  TextTable states({"precision", "bytes/param", "weights", "gradients", "optimizer", "total"},
                   {false, true, true, true, true, true});
  // Precisions with the same accounting share a row ("fp16/bf16/fp8").
  std::vector<std::pair<std::string, costmodels::ModelStateBytesPerParameter>> rows;
  for (Dtype dtype : kReportedPrecisions) {
    const costmodels::ModelStateBytesPerParameter bytes = costmodels::adam_model_state_bytes(dtype);
    const std::string name(schemas::name_of(dtype, schemas::kDtypeNames));
    if (!rows.empty() && rows.back().second == bytes) {
      rows.back().first += "/" + name;
    } else {
      rows.emplace_back(name, bytes);
    }
  }
  for (const auto& [label, bytes] : rows) {
    const auto p = static_cast<double>(parameters);
    states.add_row({label, std::to_string(bytes.total()), format_gib(bytes.weights * p),
                    format_gib(bytes.gradients * p), format_gib(bytes.optimizer * p),
                    format_gib(bytes.total() * p)});
  }
  std::cout << states.render();

  if (cluster) {
    std::cout << fmt::format(
        "\nCluster {}: {} node{} x {} {}, {} usable of {} per GPU\n"
        "  {} model states need {}: at least {} GPU{} when fully sharded (ZeRO-3), "
        "before any activations{}\n",
        cluster->name, cluster->nodes, cluster->nodes == 1 ? "" : "s", cluster->gpus_per_node,
        cluster->gpu.name, format_gib(static_cast<double>(cluster->usable_memory_bytes())),
        format_gib(static_cast<double>(cluster->gpu.memory_bytes)), options.precision,
        format_gib(static_cast<double>(state_bytes)), min_gpus, min_gpus == 1 ? "" : "s",
        min_gpus > cluster->world_size()
            ? fmt::format("; more than this cluster's {}", cluster->world_size())
            : "");
  }
  return 0;
}

}  // namespace strata::tools
