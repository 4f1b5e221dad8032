#include "strata/schemas/cluster_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "strata/schemas/document_kind.h"
#include "strata/schemas/object_reader.h"

namespace strata::schemas {
namespace {

constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;  // 1 PiB: far above any GPU
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Physical ranges. A rate's floor is far below any real device yet keeps every time the cost
// models derive from it finite: bytes / 5e-324 GB/s is inf, and inf − inf a NaN that a plan's
// ranking would sort first. README "Cluster files" states them.
constexpr NumberRange kTflopsRange{.minimum = 1e-6, .maximum = 1e6};  // 1 MFLOP/s … 1 EFLOP/s
constexpr NumberRange kMemoryGbPerSRange{.minimum = 1e-3, .maximum = 1e6};  // 1 MB/s … 1 PB/s
constexpr NumberRange kLinkGbPerSRange{.minimum = 1e-6, .maximum = 1e5};    // 1 kB/s … 100 TB/s
constexpr NumberRange kTopsRange{.minimum = 1e-9, .maximum = 1e6};          // 1,000/s … 10^18/s
// An achieved fraction of a peak: from one millionth (the profile's own floor) to all of it.
constexpr NumberRange kFractionRange{.minimum = 1e-6, .maximum = 1};
// A curve's sizes: a FLOP count or a message of at least one byte.
constexpr NumberRange kCurveSizeRange{.minimum = 1, .maximum = 1e30};
constexpr NumberRange kMicrosecondsRange{.minimum = 0, .maximum = 1e6};  // up to a second

std::vector<EfficiencyPoint> parse_efficiency_curve(const ObjectReader& parent,
                                                    std::string_view key,
                                                    std::string_view size_key) {
  std::vector<EfficiencyPoint> curve;
  if (!parent.has(key)) return curve;
  const nlohmann::json& points = parent.array(key, 1);
  for (std::size_t i = 0; i < points.size(); ++i) {
    const JsonLocation where = parent.at(key) / i;
    const ObjectReader point(points[i], where, {size_key, "fraction"});
    EfficiencyPoint parsed{point.number(size_key, kCurveSizeRange),
                           point.number("fraction", kFractionRange)};
    if (!curve.empty() && !(parsed.size > curve.back().size)) {
      point.at(size_key).fail(fmt::format(
          "{} is not above the previous point's {}; points go in "
          "increasing order of {}",
          format_json_number(parsed.size), format_json_number(curve.back().size), size_key));
    }
    curve.push_back(parsed);
  }
  return curve;
}

nlohmann::json efficiency_curve_to_json(const std::vector<EfficiencyPoint>& curve,
                                        std::string_view size_key) {
  nlohmann::json points = nlohmann::json::array();
  for (const EfficiencyPoint& point : curve) {
    points.push_back({{size_key, point.size}, {"fraction", point.fraction}});
  }
  return points;
}

GpuProfile parse_gpu(const nlohmann::json& value, const JsonLocation& location) {
  const ObjectReader reader(
      value, location,
      {"name", "description", "memory_bytes", "peak_dense_tflops", "hbm_bandwidth_gb_per_s",
       "gemm_efficiency", "hbm_efficiency", "streaming_multiprocessors", "attention_efficiency",
       "context_parallel_attention_efficiency", "special_function_tops", "random_number_tops",
       "unaligned_gemm_efficiency", "unfused_attention_efficiency", "kernel_launch_us",
       "eager_issue_us_per_kernel", "compute_slowdown_under_communication", "gemm_dtype_efficiency",
       "gemm_tiles"});
  GpuProfile gpu;
  gpu.name = reader.string("name");
  gpu.description = reader.optional_string("description");
  gpu.memory_bytes = reader.integer("memory_bytes", {1, kMaxBytes});
  const std::vector<std::string_view> dtype_names = names_of(kDtypeNames);
  const ObjectReader peaks(reader.object("peak_dense_tflops"), reader.at("peak_dense_tflops"),
                           dtype_names);
  for (const auto& [dtype, name] : kDtypeNames) {
    if (auto tflops = peaks.optional_number(name, kTflopsRange)) {
      gpu.peak_dense_tflops[dtype] = *tflops;
    }
  }
  if (gpu.peak_dense_tflops.empty()) {
    reader.at("peak_dense_tflops")
        .fail(
            fmt::format("give the peak of at least one dtype ({})", fmt::join(dtype_names, ", ")));
  }
  gpu.hbm_bandwidth_gb_per_s = reader.number("hbm_bandwidth_gb_per_s", kMemoryGbPerSRange);
  if (reader.has("gemm_dtype_efficiency")) {
    const ObjectReader factors(reader.object("gemm_dtype_efficiency"),
                               reader.at("gemm_dtype_efficiency"), dtype_names);
    for (const auto& [dtype, name] : kDtypeNames) {
      if (auto fraction = factors.optional_number(name, kFractionRange)) {
        gpu.gemm_dtype_efficiency[dtype] = *fraction;
      }
    }
  }
  gpu.gemm_efficiency_by_flops = parse_efficiency_curve(reader, "gemm_efficiency", "flops");
  gpu.hbm_efficiency_by_bytes = parse_efficiency_curve(reader, "hbm_efficiency", "bytes");
  gpu.streaming_multiprocessors = reader.optional_integer("streaming_multiprocessors", {1, 4096});
  if (reader.has("gemm_tiles")) {
    const ObjectReader tiles(reader.object("gemm_tiles"), reader.at("gemm_tiles"),
                             {"rows", "columns", "k_overhead", "fixed_us", "efficiency"});
    constexpr NumberRange kTileEdge{.minimum = 1, .maximum = 4096};
    gpu.gemm_tiles =
        GemmTileModel{.rows = tiles.number("rows", kTileEdge),
                      .columns = tiles.number("columns", kTileEdge),
                      .k_overhead = tiles.number("k_overhead", {.minimum = 0, .maximum = 1e6}),
                      .fixed_us = tiles.number("fixed_us", kMicrosecondsRange),
                      .efficiency = tiles.number("efficiency", kFractionRange)};
    if (!gpu.streaming_multiprocessors) {
      reader.at("gemm_tiles")
          .fail("tiles run in waves over the SMs: give streaming_multiprocessors");
    }
  }
  gpu.attention_efficiency = reader.optional_number("attention_efficiency", kFractionRange);
  gpu.context_parallel_attention_efficiency =
      reader.optional_number("context_parallel_attention_efficiency", kFractionRange);
  gpu.special_function_tops = reader.optional_number("special_function_tops", kTopsRange);
  gpu.random_number_tops = reader.optional_number("random_number_tops", kTopsRange);
  gpu.unaligned_gemm_efficiency =
      reader.optional_number("unaligned_gemm_efficiency", kFractionRange);
  gpu.unfused_attention_efficiency =
      reader.optional_number("unfused_attention_efficiency", kFractionRange);
  gpu.kernel_launch_us = reader.optional_number("kernel_launch_us", kMicrosecondsRange);
  gpu.eager_issue_us_per_kernel =
      reader.optional_number("eager_issue_us_per_kernel", kMicrosecondsRange);
  gpu.compute_slowdown_under_communication =
      reader.optional_number("compute_slowdown_under_communication", {.minimum = 0, .maximum = 1})
          .value_or(0);
  return gpu;
}

NetworkTier parse_tier(const nlohmann::json& value, const JsonLocation& location) {
  const ObjectReader reader(value, location,
                            {"name", "scope_gpus", "bandwidth_gb_per_s", "latency_us", "efficiency",
                             "efficiency_by_message", "efficiency_by_collective", "protocols"});
  NetworkTier tier;
  tier.name = reader.string("name");
  tier.scope_gpus = reader.integer("scope_gpus", {1, kMaxNodes * kMaxGpusPerNode});
  tier.bandwidth_gb_per_s = reader.number("bandwidth_gb_per_s", kLinkGbPerSRange);
  tier.latency_us = reader.number("latency_us", kMicrosecondsRange);
  tier.efficiency = reader.number("efficiency", kFractionRange);
  tier.efficiency_by_message_bytes =
      parse_efficiency_curve(reader, "efficiency_by_message", "bytes");
  if (reader.has("efficiency_by_collective")) {
    const ObjectReader curves(reader.object("efficiency_by_collective"),
                              reader.at("efficiency_by_collective"),
                              names_of(kTierCollectiveNames));
    for (const auto& [collective, name] : kTierCollectiveNames) {
      std::vector<EfficiencyPoint> curve = parse_efficiency_curve(curves, name, "bytes");
      if (!curve.empty()) tier.efficiency_by_collective[collective] = std::move(curve);
    }
  }
  if (reader.has("protocols")) {
    const nlohmann::json& protocols = reader.array("protocols", 1);
    const JsonLocation at = reader.at("protocols");
    for (std::size_t i = 0; i < protocols.size(); ++i) {
      const ObjectReader protocol(
          protocols[i], at / i,
          {"name", "base_latency_us", "ring_hop_latency_us", "tree_hop_latency_us",
           "bandwidth_fraction", "max_bus_gb_per_s"});
      TierProtocol parsed;
      parsed.name = protocol.string("name");
      for (const TierProtocol& earlier : tier.protocols) {
        if (earlier.name == parsed.name) {
          protocol.at("name").fail(fmt::format("\"{}\" is listed twice", parsed.name));
        }
      }
      parsed.base_latency_us = protocol.number("base_latency_us", kMicrosecondsRange);
      parsed.ring_hop_latency_us = protocol.number("ring_hop_latency_us", kMicrosecondsRange);
      parsed.tree_hop_latency_us = protocol.number("tree_hop_latency_us", kMicrosecondsRange);
      parsed.bandwidth_fraction = protocol.number("bandwidth_fraction", kFractionRange);
      parsed.max_bus_gb_per_s = protocol.optional_number("max_bus_gb_per_s", kLinkGbPerSRange);
      tier.protocols.push_back(std::move(parsed));
    }
  }
  return tier;
}

ReservedMemory parse_reserved_memory(const nlohmann::json& value, const JsonLocation& location) {
  const ObjectReader reader(
      value, location, {"cuda_context_bytes", "nccl_buffers_bytes", "allocator_slack_fraction"});
  return ReservedMemory{reader.integer("cuda_context_bytes", {0, kMaxBytes}),
                        reader.integer("nccl_buffers_bytes", {0, kMaxBytes}),
                        reader.number("allocator_slack_fraction",
                                      {.minimum = 0, .maximum = 1, .maximum_exclusive = true})};
}

MeasuredSources parse_sources(const nlohmann::json& value, const JsonLocation& location) {
  const ObjectReader reader(value, location,
                            {"measured_by", "date", "command", "hosts", "backend", "ranks",
                             "threads_per_rank", "duration_s", "spread"});
  MeasuredSources sources;
  sources.measured_by = reader.string("measured_by");
  sources.date = reader.string("date");
  sources.command = reader.string("command");
  const nlohmann::json& hosts = reader.array("hosts", 1);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (!hosts[i].is_string()) (reader.at("hosts") / i).fail("must be a string (a host name)");
    sources.hosts.push_back(hosts[i].get<std::string>());
  }
  sources.backend = reader.string("backend");
  if (sources.backend != "cpu" && sources.backend != "cuda") {
    reader.at("backend").fail(
        fmt::format("\"{}\" is not a backend (cpu or cuda)", sources.backend));
  }
  sources.ranks = reader.integer("ranks", {1, kMaxNodes * kMaxGpusPerNode});
  sources.threads_per_rank = reader.integer("threads_per_rank", {1, 1 << 20});
  sources.duration_s = reader.number("duration_s", {.minimum = 0, .maximum = 1e9});
  if (reader.has("spread")) {
    const nlohmann::json& spread = reader.object("spread");
    for (const auto& [name, fraction] : spread.items()) {
      if (!fraction.is_number() || fraction.get<double>() < 0 || fraction.get<double>() > 1e3) {
        (reader.at("spread") / name).fail("must be a number from 0 to 1000 (a relative spread)");
      }
      sources.spread[name] = fraction.get<double>();
    }
  }
  return sources;
}

}  // namespace

Dtype default_training_precision(const GpuProfile& gpu) {
  // fp8, mxfp8 and nvfp4 are never a default: a plan asks for their recipes explicitly.
  for (const Dtype preferred : {Dtype::bf16, Dtype::fp16, Dtype::tf32, Dtype::fp32}) {
    if (gpu.peak_dense_tflops.contains(preferred)) {
      return preferred;
    }
  }
  return Dtype::bf16;  // nothing listed: validation of the plan names the missing peak
}

double ClusterConfig::communicator_temporary_ratio(CommunicatorOperation operation) const {
  const auto found = communicator_temporary_bytes_per_byte.find(operation);
  return found == communicator_temporary_bytes_per_byte.end() ? 0.0 : found->second;
}

std::int64_t ClusterConfig::reserved_bytes() const {
  const auto slack = static_cast<std::int64_t>(
      std::ceil(reserved_memory.allocator_slack_fraction * static_cast<double>(gpu.memory_bytes)));
  return reserved_memory.cuda_context_bytes + reserved_memory.nccl_buffers_bytes + slack;
}

ClusterConfig parse_cluster(const nlohmann::json& document, const JsonLocation& location) {
  const ObjectReader reader(
      document, location,
      {kSchemaVersionKey, kKindKey, kEditorSchemaKey, kDescriptionKey, "name", "nodes",
       "gpus_per_node", "gpu", "network_tiers", "reserved_memory", "sources",
       "communicator_temporary_bytes_per_byte", "communicator_progress_during_compute"});
  check_document_header(reader, DocumentKind::cluster, kClusterSchemaVersion);
  ClusterConfig cluster;
  cluster.name = reader.string("name");
  cluster.description = reader.optional_string(kDescriptionKey);
  if (reader.has("sources")) {
    cluster.sources = parse_sources(reader.object("sources"), reader.at("sources"));
  }
  cluster.nodes = reader.integer("nodes", {1, kMaxNodes});
  cluster.gpus_per_node = reader.integer("gpus_per_node", {1, kMaxGpusPerNode});
  cluster.gpu = parse_gpu(reader.object("gpu"), reader.at("gpu"));
  const nlohmann::json& tiers = reader.array("network_tiers", 1);
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    cluster.network_tiers.push_back(parse_tier(tiers[i], reader.at("network_tiers") / i));
  }
  cluster.reserved_memory =
      parse_reserved_memory(reader.object("reserved_memory"), reader.at("reserved_memory"));
  if (reader.has("communicator_temporary_bytes_per_byte")) {
    const ObjectReader ratios(reader.object("communicator_temporary_bytes_per_byte"),
                              reader.at("communicator_temporary_bytes_per_byte"),
                              names_of(kCommunicatorOperationNames));
    for (const auto& [operation, name] : kCommunicatorOperationNames) {
      const std::optional<double> ratio =
          ratios.optional_number(name, {.minimum = 0, .maximum = 16});
      if (ratio) cluster.communicator_temporary_bytes_per_byte[operation] = *ratio;
    }
  }
  cluster.communicator_progress_during_compute =
      reader.optional_number("communicator_progress_during_compute", {.minimum = 0, .maximum = 1});
  validate_cluster(cluster, location);
  return cluster;
}

void validate_cluster(const ClusterConfig& cluster, const JsonLocation& location) {
  const JsonLocation tiers = location / "network_tiers";
  for (std::size_t i = 0; i < cluster.network_tiers.size(); ++i) {
    const std::int64_t scope = cluster.network_tiers[i].scope_gpus;
    const JsonLocation where = tiers / i / "scope_gpus";
    if (scope % cluster.gpus_per_node != 0 && cluster.gpus_per_node % scope != 0) {
      where.fail(fmt::format("{} neither divides gpus_per_node={} nor is a multiple of it", scope,
                             cluster.gpus_per_node));
    }
    if (i > 0 && scope % cluster.network_tiers[i - 1].scope_gpus != 0) {
      where.fail(
          fmt::format("{} is not a multiple of the previous tier's {}; tiers go from the "
                      "inside out and each one groups whole copies of the one inside it",
                      scope, cluster.network_tiers[i - 1].scope_gpus));
    }
  }
  const NetworkTier& outermost = cluster.network_tiers.back();
  if (outermost.scope_gpus < cluster.world_size()) {
    (tiers / (cluster.network_tiers.size() - 1) / "scope_gpus")
        .fail(fmt::format("{} is less than the cluster's {} GPUs ({} nodes × {}); the outermost "
                          "tier must connect every GPU",
                          outermost.scope_gpus, cluster.world_size(), cluster.nodes,
                          cluster.gpus_per_node));
  }
  if (cluster.reserved_bytes() >= cluster.gpu.memory_bytes) {
    (location / "reserved_memory")
        .fail(fmt::format("reserves {:.2f} GiB of the GPU's {:.2f} GiB, leaving nothing for "
                          "training",
                          static_cast<double>(cluster.reserved_bytes()) / kGiB,
                          static_cast<double>(cluster.gpu.memory_bytes) / kGiB));
  }
}

namespace {

// The "gpu" object of a cluster document.
nlohmann::json gpu_profile_to_json(const GpuProfile& profile) {
  nlohmann::json peaks = nlohmann::json::object();
  for (const auto& [dtype, tflops] : profile.peak_dense_tflops) {
    peaks[std::string(name_of(dtype, kDtypeNames))] = tflops;
  }
  nlohmann::json gpu = {{"name", profile.name},
                        {"memory_bytes", profile.memory_bytes},
                        {"peak_dense_tflops", peaks},
                        {"hbm_bandwidth_gb_per_s", profile.hbm_bandwidth_gb_per_s}};
  if (profile.description) gpu["description"] = *profile.description;
  if (!profile.gemm_efficiency_by_flops.empty()) {
    gpu["gemm_efficiency"] = efficiency_curve_to_json(profile.gemm_efficiency_by_flops, "flops");
  }
  if (!profile.hbm_efficiency_by_bytes.empty()) {
    gpu["hbm_efficiency"] = efficiency_curve_to_json(profile.hbm_efficiency_by_bytes, "bytes");
  }
  if (!profile.gemm_dtype_efficiency.empty()) {
    nlohmann::json factors = nlohmann::json::object();
    for (const auto& [dtype, fraction] : profile.gemm_dtype_efficiency) {
      factors[std::string(name_of(dtype, kDtypeNames))] = fraction;
    }
    gpu["gemm_dtype_efficiency"] = factors;
  }
  if (profile.streaming_multiprocessors) {
    gpu["streaming_multiprocessors"] = *profile.streaming_multiprocessors;
  }
  if (profile.gemm_tiles) {
    const GemmTileModel& tiles = *profile.gemm_tiles;
    gpu["gemm_tiles"] = {{"rows", tiles.rows},
                         {"columns", tiles.columns},
                         {"k_overhead", tiles.k_overhead},
                         {"fixed_us", tiles.fixed_us},
                         {"efficiency", tiles.efficiency}};
  }
  if (profile.attention_efficiency) {
    gpu["attention_efficiency"] = *profile.attention_efficiency;
  }
  if (profile.context_parallel_attention_efficiency) {
    gpu["context_parallel_attention_efficiency"] = *profile.context_parallel_attention_efficiency;
  }
  if (profile.special_function_tops) {
    gpu["special_function_tops"] = *profile.special_function_tops;
  }
  if (profile.random_number_tops) {
    gpu["random_number_tops"] = *profile.random_number_tops;
  }
  if (profile.unaligned_gemm_efficiency) {
    gpu["unaligned_gemm_efficiency"] = *profile.unaligned_gemm_efficiency;
  }
  if (profile.unfused_attention_efficiency) {
    gpu["unfused_attention_efficiency"] = *profile.unfused_attention_efficiency;
  }
  if (profile.kernel_launch_us) gpu["kernel_launch_us"] = *profile.kernel_launch_us;
  if (profile.eager_issue_us_per_kernel) {
    gpu["eager_issue_us_per_kernel"] = *profile.eager_issue_us_per_kernel;
  }
  if (profile.compute_slowdown_under_communication > 0) {
    gpu["compute_slowdown_under_communication"] = profile.compute_slowdown_under_communication;
  }
  return gpu;
}

// The "network_tiers" array of a cluster document, inside out.
nlohmann::json network_tiers_to_json(const std::vector<NetworkTier>& network_tiers) {
  nlohmann::json tiers = nlohmann::json::array();
  for (const NetworkTier& tier : network_tiers) {
    nlohmann::json entry = {{"name", tier.name},
                            {"scope_gpus", tier.scope_gpus},
                            {"bandwidth_gb_per_s", tier.bandwidth_gb_per_s},
                            {"latency_us", tier.latency_us},
                            {"efficiency", tier.efficiency}};
    if (!tier.efficiency_by_message_bytes.empty()) {
      entry["efficiency_by_message"] =
          efficiency_curve_to_json(tier.efficiency_by_message_bytes, "bytes");
    }
    for (const auto& [collective, curve] : tier.efficiency_by_collective) {
      entry["efficiency_by_collective"][std::string(name_of(collective, kTierCollectiveNames))] =
          efficiency_curve_to_json(curve, "bytes");
    }
    for (const TierProtocol& protocol : tier.protocols) {
      nlohmann::json written = {{"name", protocol.name},
                                {"base_latency_us", protocol.base_latency_us},
                                {"ring_hop_latency_us", protocol.ring_hop_latency_us},
                                {"tree_hop_latency_us", protocol.tree_hop_latency_us},
                                {"bandwidth_fraction", protocol.bandwidth_fraction}};
      if (protocol.max_bus_gb_per_s) written["max_bus_gb_per_s"] = *protocol.max_bus_gb_per_s;
      entry["protocols"].push_back(written);
    }
    tiers.push_back(entry);
  }
  return tiers;
}

}  // namespace

nlohmann::json cluster_to_json(const ClusterConfig& cluster) {
  nlohmann::json document = {
      {kSchemaVersionKey, kClusterSchemaVersion},
      {kKindKey, "cluster"},
      {"name", cluster.name},
      {"nodes", cluster.nodes},
      {"gpus_per_node", cluster.gpus_per_node},
      {"gpu", gpu_profile_to_json(cluster.gpu)},
      {"network_tiers", network_tiers_to_json(cluster.network_tiers)},
      {"reserved_memory",
       {{"cuda_context_bytes", cluster.reserved_memory.cuda_context_bytes},
        {"nccl_buffers_bytes", cluster.reserved_memory.nccl_buffers_bytes},
        {"allocator_slack_fraction", cluster.reserved_memory.allocator_slack_fraction}}}};
  if (cluster.description) document[kDescriptionKey] = *cluster.description;
  for (const auto& [operation, ratio] : cluster.communicator_temporary_bytes_per_byte) {
    document["communicator_temporary_bytes_per_byte"]
            [std::string(name_of(operation, kCommunicatorOperationNames))] = ratio;
  }
  if (cluster.communicator_progress_during_compute) {
    document["communicator_progress_during_compute"] =
        *cluster.communicator_progress_during_compute;
  }
  if (cluster.sources) {
    const MeasuredSources& sources = *cluster.sources;
    document["sources"] = {{"measured_by", sources.measured_by},
                           {"date", sources.date},
                           {"command", sources.command},
                           {"hosts", sources.hosts},
                           {"backend", sources.backend},
                           {"ranks", sources.ranks},
                           {"threads_per_rank", sources.threads_per_rank},
                           {"duration_s", sources.duration_s},
                           {"spread", sources.spread}};
  }
  return document;
}

}  // namespace strata::schemas
