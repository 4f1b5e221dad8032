// `strata describe`: what a model is made of and what it costs before any parallelism —
// parameters by component, FLOPs per token, model-state bytes per precision, and on a cluster
// the fewest GPUs that can hold the model states at all.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "commands.h"
#include "strata/costmodels/model_flops.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "text_format.h"

namespace strata::tools {
namespace {

using schemas::Dtype;

struct Component {
  std::string key;    // JSON name
  std::string label;  // table label
  std::int64_t parameters;
};

std::string layers_label(std::int64_t layers, std::string_view kind = "") {
  return fmt::format("({} {}layer{})", layers, kind, layers == 1 ? "" : "s");
}

// A dense model's rows are its embedding, attention, mlp, norms and head; a mixture of experts
// adds the router, routed experts and shared experts of its MoE layers (zero rows are not shown).
std::vector<Component> components_of(const costmodels::ParameterBreakdown& count) {
  const std::int64_t dense = count.num_dense_layers();
  const std::int64_t moe = count.num_moe_layers;
  const std::string dense_kind = moe > 0 ? "dense " : "";
  std::vector<Component> components = {
      {"token_embedding", "token embedding", count.token_embedding},
      {"position_embedding", "position embedding", count.position_embedding},
      {"embedding_norm", "embedding norm", count.embedding_norm},
      {"attention", "attention " + layers_label(count.num_layers),
       count.num_layers * count.attention_per_layer},
      {"mlp", "mlp " + layers_label(dense, dense_kind), dense * count.mlp_per_layer},
      {"router", "router " + layers_label(moe, "MoE "), moe * count.router_per_moe_layer},
      {"routed_experts",
       fmt::format("routed experts ({} MoE layers × {})", moe, count.num_routed_experts),
       moe * count.routed_experts_per_moe_layer()},
      {"shared_experts", "shared experts " + layers_label(moe, "MoE "),
       moe * count.shared_experts_per_moe_layer},
      {"layer_norms", "norms " + layers_label(count.num_layers),
       count.num_layers * count.norms_per_layer},
      {"final_norm", "final norm", count.final_norm},
      {"lm_head", "lm head (untied)", count.lm_head}};
  return components;
}

constexpr std::array<Dtype, 4> kReportedPrecisions{Dtype::fp32, Dtype::fp16, Dtype::bf16,
                                                   Dtype::fp8};

}  // namespace

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
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16", "fp8"}))
      ->capture_default_str();
  add_format_option(command, options.format);
  return command;
}

int run_describe(const DescribeOptions& options) {
  const schemas::ModelConfig model = schemas::resolve_model(options.model);
  const std::optional<schemas::ClusterConfig> cluster =
      options.cluster ? std::optional(schemas::resolve_cluster(*options.cluster)) : std::nullopt;
  const Dtype precision = *schemas::value_of(options.precision, schemas::kDtypeNames);
  const std::int64_t seq_length = options.seq_length.value_or(model.max_seq_length);
  if (seq_length > model.max_seq_length) {
    throw schemas::InputError("--seq-len", "",
                              fmt::format("{} is more than {}'s max_seq_length={}", seq_length,
                                          model.name, model.max_seq_length));
  }

  const costmodels::ParameterBreakdown count = costmodels::count_parameters(model);
  const std::int64_t parameters = count.total();
  const costmodels::FlopsPerToken flops = costmodels::model_flops_per_token(model, seq_length);
  const std::int64_t state_bytes =
      costmodels::adam_model_state_bytes(precision).total() * parameters;

  nlohmann::json report = {
      {"model", model.name},
      {"architecture", schemas::name_of(model.architecture, schemas::kArchitectureNames)},
      {"parameters", parameters},
      {"active_parameters", count.active()},
      {"seq_length", seq_length},
      {"flops_per_token",
       {{"forward", flops.forward}, {"backward", flops.backward}, {"training", flops.training()}}}};
  for (const Component& component : components_of(count)) {
    report["parameters_by_component"][component.key] = component.parameters;
  }
  for (Dtype dtype : kReportedPrecisions) {
    const costmodels::ModelStateBytesPerParameter bytes = costmodels::adam_model_state_bytes(dtype);
    const std::int64_t p = parameters;
    report["model_state_bytes"][std::string(schemas::name_of(dtype, schemas::kDtypeNames))] = {
        {"weights", bytes.weights * p},
        {"gradients", bytes.gradients * p},
        {"optimizer", bytes.optimizer * p},
        {"total", bytes.total() * p}};
  }
  std::int64_t min_gpus = 0;
  if (cluster) {
    min_gpus = static_cast<std::int64_t>(std::ceil(
        static_cast<double>(state_bytes) / static_cast<double>(cluster->usable_memory_bytes())));
    report["cluster"] = {{"name", cluster->name},
                         {"gpus", cluster->world_size()},
                         {"gpu", cluster->gpu.name},
                         {"usable_memory_bytes_per_gpu", cluster->usable_memory_bytes()},
                         {"precision", options.precision},
                         {"model_state_bytes", state_bytes},
                         {"min_gpus_for_model_states", min_gpus}};
  }

  if (options.format == OutputFormat::json) {
    std::cout << report.dump(2) << "\n";
    return 0;
  }

  std::cout << fmt::format("Model {} ({}): {} parameters\n", model.name,
                           schemas::name_of(model.architecture, schemas::kArchitectureNames),
                           group_thousands(parameters));
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
