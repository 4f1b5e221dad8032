#include "strata/profiler/preset_comparison.h"

#include <cmath>
#include <limits>

#include "strata/costmodels/kernel_time.h"
#include "strata/schemas/presets.h"

namespace strata::profiler {
namespace {

double peak_of(const schemas::GpuProfile& gpu) {
  return costmodels::peak_tflops(gpu, schemas::Dtype::fp32);
}

double distance(const schemas::ClusterConfig& a, const schemas::ClusterConfig& b) {
  const auto term = [](double x, double y) {
    return x > 0 && y > 0 ? std::abs(std::log(x / y)) : 0.0;
  };
  return term(peak_of(a.gpu), peak_of(b.gpu)) +
         term(a.gpu.hbm_bandwidth_gb_per_s, b.gpu.hbm_bandwidth_gb_per_s) +
         term(a.network_tiers.front().bandwidth_gb_per_s,
              b.network_tiers.front().bandwidth_gb_per_s);
}

double spread_of(const schemas::ClusterConfig& cluster, const std::string& key) {
  if (!cluster.sources) return 0;
  const auto found = cluster.sources->spread.find(key);
  return found == cluster.sources->spread.end() ? 0 : found->second;
}

}  // namespace

PresetComparison compare_with_presets(const schemas::ClusterConfig& measured) {
  double best = std::numeric_limits<double>::infinity();
  schemas::ClusterConfig closest;
  for (const std::string_view name : schemas::cluster_preset_names()) {
    const schemas::ClusterConfig preset = schemas::cluster_preset(name);
    const double d = distance(measured, preset);
    if (d < best) {
      best = d;
      closest = preset;
    }
  }
  PresetComparison comparison{closest.name, {}};
  const schemas::GpuProfile& m = measured.gpu;
  const schemas::GpuProfile& p = closest.gpu;
  comparison.rows.push_back(
      {"peak fp32 TFLOP/s", peak_of(m), spread_of(measured, "gemm"), peak_of(p)});
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
  comparison.rows.push_back({"kernel launch µs", m.kernel_launch_us.value_or(0),
                             spread_of(measured, "launch"), p.kernel_launch_us.value_or(0)});
  for (std::size_t i = 0; i < measured.network_tiers.size(); ++i) {
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
