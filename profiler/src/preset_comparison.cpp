#include "strata/profiler/preset_comparison.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "strata/costmodels/kernel_time.h"
#include "strata/schemas/presets.h"

namespace strata::profiler {
namespace {

// The precision the measured profile's GEMMs ran in (fp32 on a CPU, bf16 on a GPU by default):
// presets are compared at their peak in the same one.
schemas::Dtype measured_precision(const schemas::ClusterConfig& measured) {
  return measured.gpu.peak_dense_tflops.empty() ? schemas::Dtype::fp32
                                                : measured.gpu.peak_dense_tflops.begin()->first;
}

// A profile of one rank measured no network (its tier is a placeholder): only its device counts.
bool network_measured(const schemas::ClusterConfig& measured) {
  return !measured.sources || measured.sources->ranks > 1;
}

double distance(const schemas::ClusterConfig& a, const schemas::ClusterConfig& b,
                schemas::Dtype dtype) {
  const auto term = [](double x, double y) {
    return x > 0 && y > 0 ? std::abs(std::log(x / y)) : 0.0;
  };
  return term(costmodels::peak_tflops(a.gpu, dtype), costmodels::peak_tflops(b.gpu, dtype)) +
         term(a.gpu.hbm_bandwidth_gb_per_s, b.gpu.hbm_bandwidth_gb_per_s) +
         (network_measured(a) ? term(a.network_tiers.front().bandwidth_gb_per_s,
                                     b.network_tiers.front().bandwidth_gb_per_s)
                              : 0.0);
}

double spread_of(const schemas::ClusterConfig& cluster, const std::string& key) {
  if (!cluster.sources) return 0;
  const auto found = cluster.sources->spread.find(key);
  return found == cluster.sources->spread.end() ? 0 : found->second;
}

}  // namespace

PresetComparison compare_with_presets(const schemas::ClusterConfig& measured) {
  const schemas::Dtype dtype = measured_precision(measured);
  double best = std::numeric_limits<double>::infinity();
  schemas::ClusterConfig closest;
  for (const std::string_view name : schemas::cluster_preset_names()) {
    const schemas::ClusterConfig preset = schemas::cluster_preset(name);
    const double d = distance(measured, preset, dtype);
    if (d < best) {
      best = d;
      closest = preset;
    }
  }
  PresetComparison comparison{closest.name, {}};
  const schemas::GpuProfile& m = measured.gpu;
  const schemas::GpuProfile& p = closest.gpu;
  comparison.rows.push_back(
      {fmt::format("peak {} TFLOP/s", schemas::name_of(dtype, schemas::kDtypeNames)),
       costmodels::peak_tflops(m, dtype), spread_of(measured, "gemm"),
       costmodels::peak_tflops(p, dtype)});
  if (m.unaligned_gemm_efficiency) {
    comparison.rows.push_back({"unaligned GEMM efficiency", *m.unaligned_gemm_efficiency,
                               spread_of(measured, "gemm"),
                               p.unaligned_gemm_efficiency.value_or(0)});
  }
  comparison.rows.push_back({"memory-bound kernels GB/s", m.hbm_bandwidth_gb_per_s,
                             spread_of(measured, "memory_bandwidth"), p.hbm_bandwidth_gb_per_s});
  comparison.rows.push_back({"special functions T/s", m.special_function_tops.value_or(0),
                             spread_of(measured, "special_functions"),
                             p.special_function_tops.value_or(0)});
  comparison.rows.push_back({"random numbers T/s", m.random_number_tops.value_or(0),
                             spread_of(measured, "random_numbers"),
                             p.random_number_tops.value_or(0)});
  comparison.rows.push_back({"attention efficiency", m.attention_efficiency.value_or(0),
                             spread_of(measured, "attention"), p.attention_efficiency.value_or(0)});
  if (m.context_parallel_attention_efficiency) {
    // A preset without its own rate runs cp attention at the whole-sequence one.
    comparison.rows.push_back(
        {"cp attention efficiency", *m.context_parallel_attention_efficiency,
         spread_of(measured, "context_parallel_attention"),
         p.context_parallel_attention_efficiency.value_or(p.attention_efficiency.value_or(0))});
  }
  comparison.rows.push_back({"kernel launch µs", m.kernel_launch_us.value_or(0),
                             spread_of(measured, "launch"), p.kernel_launch_us.value_or(0)});
  const std::size_t tiers = network_measured(measured) ? measured.network_tiers.size() : 0;
  for (std::size_t i = 0; i < tiers; ++i) {
    const schemas::NetworkTier& tier = measured.network_tiers[i];
    const schemas::NetworkTier* other =
        i < closest.network_tiers.size() ? &closest.network_tiers[i] : nullptr;
    const std::string key = "tier_" + std::to_string(i);
    comparison.rows.push_back({"tier " + std::to_string(i) + " (" + tier.name + ") GB/s",
                               tier.bandwidth_gb_per_s, spread_of(measured, key),
                               other ? other->bandwidth_gb_per_s : 0});
    // Files written before the latency had a spread of its own carry the tier's only.
    const bool own_latency_spread =
        measured.sources && measured.sources->spread.contains(key + "_latency");
    comparison.rows.push_back({"tier " + std::to_string(i) + " (" + tier.name + ") latency µs",
                               tier.latency_us,
                               spread_of(measured, own_latency_spread ? key + "_latency" : key),
                               other ? other->latency_us : 0});
  }
  return comparison;
}

}  // namespace strata::profiler
