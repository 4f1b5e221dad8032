#include "strata/simulator/published_run.h"

#include <fmt/format.h>

#include <sstream>

#include "strata/schemas/json_file.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::simulator {
namespace {

using schemas::JsonLocation;

const nlohmann::json& member(const nlohmann::json& object, const JsonLocation& location,
                             const char* key) {
  if (!object.is_object() || !object.contains(key)) {
    location.fail(fmt::format("missing required key \"{}\"", key));
  }
  return object.at(key);
}

std::int64_t integer(const nlohmann::json& object, const JsonLocation& location, const char* key) {
  const nlohmann::json& value = member(object, location, key);
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0) {
    (location / key).fail(fmt::format("{} is not a non-negative integer", value.dump()));
  }
  return value.get<std::int64_t>();
}

std::string text(const nlohmann::json& object, const JsonLocation& location, const char* key) {
  const nlohmann::json& value = member(object, location, key);
  if (!value.is_string()) (location / key).fail(fmt::format("{} is not a string", value.dump()));
  return value.get<std::string>();
}

template <typename Enum, std::size_t N>
Enum choice(const nlohmann::json& object, const JsonLocation& location, const char* key,
            const std::array<schemas::EnumName<Enum>, N>& names) {
  const std::string name = text(object, location, key);
  if (auto value = schemas::value_of(name, names)) return *value;
  std::string allowed;
  for (const auto& entry : names)
    allowed += (allowed.empty() ? "" : ", ") + std::string(entry.name);
  (location / key).fail(fmt::format("\"{}\" is not one of {}", name, allowed));
}

schemas::ModelConfig row_model(const std::string& id, const nlohmann::json& row,
                               const JsonLocation& location) {
  const std::string mlp =
      row.contains("mlp") && row["mlp"].is_string() ? row["mlp"].get<std::string>() : "gelu";
  const bool llama = mlp == "swiglu";
  schemas::ModelConfig model = schemas::ModelConfig::defaults_for(
      llama ? schemas::Architecture::llama : schemas::Architecture::gpt);
  model.name = id;
  model.num_layers = integer(row, location, "num_layers");
  model.hidden_size = integer(row, location, "hidden_size");
  model.ffn_hidden_size = integer(row, location, "ffn_hidden_size");
  model.num_attention_heads = integer(row, location, "num_attention_heads");
  model.num_kv_heads = row.contains("num_kv_heads") ? integer(row, location, "num_kv_heads")
                                                    : model.num_attention_heads;
  if (model.num_attention_heads == 0 || model.hidden_size % model.num_attention_heads != 0) {
    (location / "num_attention_heads")
        .fail(fmt::format("{} does not divide hidden_size={}", model.num_attention_heads,
                          model.hidden_size));
  }
  model.head_dim = model.hidden_size / model.num_attention_heads;
  model.vocab_size = integer(row, location, "vocab_size");
  model.max_seq_length = integer(row, location, "seq_length");
  if (!llama) {
    // GPT-style runs of Megatron-LM: hidden and attention dropout 0.1.
    model.dropout = 0.1;
    if (mlp == "squared_relu") model.mlp_activation = schemas::MlpActivation::squared_relu;
  }
  schemas::validate_model(model, location);
  return model;
}

schemas::PlanKnobs row_knobs(const nlohmann::json& parallel, const JsonLocation& location) {
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = integer(parallel, location, "tp");
  knobs.mesh.pp = integer(parallel, location, "pp");
  knobs.mesh.dp = integer(parallel, location, "dp");
  knobs.mesh.cp = parallel.contains("cp") ? integer(parallel, location, "cp") : 1;
  knobs.mesh.vpp = parallel.contains("vpp") ? integer(parallel, location, "vpp") : 1;
  knobs.micro_batch_size = integer(parallel, location, "micro_batch_size");
  knobs.global_batch_size = integer(parallel, location, "global_batch_size");
  const nlohmann::json& sp = member(parallel, location, "sequence_parallel");
  knobs.sequence_parallel = sp.is_boolean() && sp.get<bool>();
  knobs.zero_stage = integer(parallel, location, "zero_stage");
  // Rows do not say how gradients were reduced. Megatron-LM reduces them after the backward
  // unless --overlap-grad-reduce is given, Megatron-LM before Megatron-Core (2021–22) and
  // DeepSpeed's pipeline engine always do; only recent recipes (NeMo's) overlap. Assume the
  // default. (On the published rows, overlapping would make the NeMo rows 0.6–1.8% faster.)
  knobs.overlap_grad_reduce = false;
  knobs.recompute = choice(parallel, location, "recompute", schemas::kRecomputeGranularityNames);
  knobs.precision = choice(parallel, location, "precision", schemas::kDtypeNames);
  knobs.schedule = knobs.mesh.vpp > 1 ? schemas::ScheduleType::interleaved_one_f_one_b
                                      : schemas::ScheduleType::one_f_one_b;
  return knobs;
}

}  // namespace

schemas::ClusterConfig published_run_cluster(const std::string& gpu, std::int64_t num_gpus,
                                             std::int64_t gpus_per_node,
                                             std::optional<double> inter_node_gbps_per_gpu,
                                             const JsonLocation& location) {
  std::string preset;
  if (gpu == "a100-sxm4-80gb") preset = "dgx-a100-80gb";
  if (gpu == "a100-sxm4-40gb") preset = "dgx-a100-40gb";
  if (gpu == "h100-sxm5-80gb") preset = "dgx-h100";
  if (preset.empty()) {
    (location / "gpu")
        .fail(fmt::format("\"{}\" is not one of a100-sxm4-80gb, a100-sxm4-40gb, h100-sxm5-80gb",
                          gpu));
  }
  const schemas::ClusterConfig node = schemas::cluster_preset(preset);
  if (gpus_per_node != node.gpus_per_node) {
    (location / "gpus_per_node")
        .fail(fmt::format("{} differs from the {} node's {}", gpus_per_node, preset,
                          node.gpus_per_node));
  }
  if (num_gpus <= 0 || num_gpus % gpus_per_node != 0) {
    (location / "num_gpus")
        .fail(fmt::format("{} is not a multiple of gpus_per_node={}", num_gpus, gpus_per_node));
  }
  schemas::ClusterConfig cluster =
      schemas::cluster_preset(fmt::format("{}:{}", preset, num_gpus / gpus_per_node));
  if (inter_node_gbps_per_gpu) {
    cluster.network_tiers.back().bandwidth_gb_per_s = *inter_node_gbps_per_gpu / 8.0;
  }
  return cluster;
}

std::vector<PublishedRun> read_published_runs(const std::filesystem::path& path) {
  const std::string content = schemas::read_text_file(path);
  std::istringstream lines(content);
  std::string line;
  std::vector<PublishedRun> runs;
  for (std::int64_t number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string source = fmt::format("{}:{}", path.string(), number);
    const nlohmann::json row = schemas::parse_json_text(line, source);
    const JsonLocation location(source);
    PublishedRun run;
    run.id = text(row, location, "id");
    run.source = row.contains("source") && row["source"].is_string()
                     ? row["source"].get<std::string>()
                     : std::string();
    run.tier = row.contains("tier") && row["tier"].is_string() ? row["tier"].get<std::string>()
                                                               : std::string();
    run.complete =
        row.contains("complete") && row["complete"].is_boolean() && row["complete"].get<bool>();
    const nlohmann::json& measured = member(row, location, "measured");
    if (measured.contains("iteration_time_s") && measured["iteration_time_s"].is_number()) {
      run.measured_step_time_s = measured["iteration_time_s"].get<double>();
    }
    if (run.complete) {
      const nlohmann::json& system = member(row, location, "system");
      const JsonLocation system_at = location / "system";
      std::optional<double> inter_node;
      if (system.contains("inter_node_gbps_per_gpu") &&
          system["inter_node_gbps_per_gpu"].is_number()) {
        inter_node = system["inter_node_gbps_per_gpu"].get<double>();
      }
      const schemas::ClusterConfig cluster = published_run_cluster(
          text(system, system_at, "gpu"), integer(system, system_at, "num_gpus"),
          integer(system, system_at, "gpus_per_node"), inter_node, system_at);
      const schemas::ModelConfig model =
          row_model(run.id, member(row, location, "model"), location / "model");
      const schemas::PlanKnobs knobs =
          row_knobs(member(row, location, "parallel"), location / "parallel");
      run.plan = schemas::build_plan(model, cluster, knobs, source);
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace strata::simulator
