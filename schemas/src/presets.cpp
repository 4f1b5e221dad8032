#include "strata/schemas/presets.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <numeric>
#include <span>

#include "strata/schemas/closest_name.h"
#include "strata/schemas/embedded_file.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::schemas {

// Defined in the generated preset sources (see schemas/CMakeLists.txt).
extern const EmbeddedFile kModelPresetFiles[];
extern const std::size_t kModelPresetFiles_count;
extern const EmbeddedFile kClusterPresetFiles[];
extern const std::size_t kClusterPresetFiles_count;

namespace {

std::span<const EmbeddedFile> model_files() { return {kModelPresetFiles, kModelPresetFiles_count}; }
std::span<const EmbeddedFile> cluster_files() {
  return {kClusterPresetFiles, kClusterPresetFiles_count};
}

std::vector<std::string_view> names_of(std::span<const EmbeddedFile> files) {
  std::vector<std::string_view> names;
  for (const EmbeddedFile& file : files) names.push_back(file.name);
  return names;
}

const EmbeddedFile* find_file(std::span<const EmbeddedFile> files, std::string_view name) {
  for (const EmbeddedFile& file : files) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

[[noreturn]] void fail_unknown(std::string_view what, std::string_view name,
                               const std::vector<std::string_view>& names) {
  const std::optional<std::string_view> suggestion = closest_name(name, names);
  std::string rule = fmt::format("no {} preset named \"{}\"", what, name);
  rule += suggestion ? fmt::format("; did you mean \"{}\"?", *suggestion)
                     : fmt::format("; `strata presets` lists them");
  throw InputError(fmt::format("{} preset", what), "", rule);
}

}  // namespace

std::vector<std::string_view> model_preset_names() { return names_of(model_files()); }
std::vector<std::string_view> cluster_preset_names() { return names_of(cluster_files()); }

bool is_model_preset(std::string_view name) { return find_file(model_files(), name) != nullptr; }

bool is_cluster_preset_spec(std::string_view spec) {
  return find_file(cluster_files(), spec.substr(0, spec.find(':'))) != nullptr;
}

std::string_view model_preset_document(std::string_view name) {
  const EmbeddedFile* file = find_file(model_files(), name);
  if (file == nullptr) fail_unknown("model", name, model_preset_names());
  return file->contents;
}

std::string_view cluster_preset_document(std::string_view name) {
  const EmbeddedFile* file = find_file(cluster_files(), name);
  if (file == nullptr) fail_unknown("cluster", name, cluster_preset_names());
  return file->contents;
}

ModelConfig model_preset(std::string_view name) {
  const std::string source = fmt::format("<preset {}>", name);
  return parse_model(parse_json_text(model_preset_document(name), source), JsonLocation(source));
}

namespace {

// A count in a preset spec, or a one-line error naming the spec and what the count must be.
std::int64_t spec_count(std::string_view spec, std::string_view count, std::string_view what,
                        std::int64_t maximum) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), value);
  if (error != std::errc() || end != count.data() + count.size() || value < 1 || value > maximum) {
    throw InputError(
        "cluster preset", "",
        fmt::format("\"{}\": {} must be an integer from 1 to {}", spec, what, maximum));
  }
  return value;
}

}  // namespace

void use_gpus_per_node(ClusterConfig& cluster, std::int64_t gpus) {
  const std::int64_t whole_node = cluster.gpus_per_node;
  for (NetworkTier& tier : cluster.network_tiers) {
    if (tier.scope_gpus > whole_node) {
      // A tier spanning nodes spans the same number of nodes, each with fewer GPUs.
      tier.scope_gpus = tier.scope_gpus / whole_node * gpus;
    } else {
      // Inside a node: the GPUs used that share the tier (an NVSwitch domain holds all of them).
      tier.scope_gpus = tier.scope_gpus == whole_node ? gpus : std::gcd(tier.scope_gpus, gpus);
    }
  }
  cluster.gpus_per_node = gpus;
}

ClusterConfig cluster_preset(std::string_view spec) {
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const std::string source = fmt::format("<preset {}>", name);
  ClusterConfig cluster =
      parse_cluster(parse_json_text(cluster_preset_document(name), source), JsonLocation(source));
  if (colon == std::string_view::npos) return cluster;
  return with_node_counts(std::move(cluster), spec, spec.substr(colon + 1));
}

ClusterConfig with_node_counts(ClusterConfig cluster, std::string_view spec,
                               std::string_view counts) {
  // NODES, or NODESxGPUS: that many GPUs of each node (part of a node: dgx-a100-80gb:1x2).
  const std::size_t times = counts.find('x');
  cluster.nodes = spec_count(spec, counts.substr(0, times), "the node count after ':'", kMaxNodes);
  if (times != std::string_view::npos) {
    const std::int64_t gpus =
        spec_count(spec, counts.substr(times + 1),
                   fmt::format("the GPUs per node after 'x' (a {} node has {})", cluster.name,
                               cluster.gpus_per_node),
                   cluster.gpus_per_node);
    use_gpus_per_node(cluster, gpus);
  }
  cluster.network_tiers.back().scope_gpus =
      std::max(cluster.network_tiers.back().scope_gpus, cluster.world_size());
  validate_cluster(cluster, JsonLocation(std::string(spec)));
  return cluster;
}

}  // namespace strata::schemas
