#include "strata/profiler/profile_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "strata/costmodels/attention_time.h"
#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/kernel_time.h"

namespace strata::profiler {
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Points of an efficiency curve from (size, fraction) samples: the median fraction of each band
// of sizes within a factor `band` of its smallest, at the band's geometric-mean size.
std::vector<schemas::EfficiencyPoint> banded_curve(std::vector<std::pair<double, double>> samples,
                                                   double band) {
  std::sort(samples.begin(), samples.end());
  std::vector<schemas::EfficiencyPoint> curve;
  std::size_t begin = 0;
  while (begin < samples.size()) {
    std::size_t end = begin;
    double log_sum = 0;
    std::vector<double> fractions;
    while (end < samples.size() && samples[end].first <= samples[begin].first * band) {
      log_sum += std::log(samples[end].first);
      fractions.push_back(samples[end].second);
      ++end;
    }
    // A band of one size keeps it exactly (messages of 4,096 bytes are written as 4096, not as
    // exp(log 4096)'s 4095.999999999997).
    const double size = samples[end - 1].first == samples[begin].first
                            ? samples[begin].first
                            : std::exp(log_sum / static_cast<double>(end - begin));
    const double fraction = std::clamp(median(fractions), 1e-6, 1.0);
    if (curve.empty() || size > curve.back().size) curve.push_back({size, fraction});
    begin = end;
  }
  return curve;
}

// The collective as collective_time_s prices it on one tier: its volume (the nccl-tests factor).
struct CollectiveShape {
  double volume = 1;
  costmodels::Collective collective = costmodels::Collective::all_reduce;
};
CollectiveShape shape_of(const CollectiveSample& sample) {
  const double n = sample.group_size;
  switch (sample.collective) {
    case MeasuredCollective::all_reduce:
      return {2 * (n - 1) / n, costmodels::Collective::all_reduce};
    case MeasuredCollective::all_reduce_non_blocking:
      return {2 * (n - 1) / n, costmodels::Collective::all_reduce_non_blocking};
    case MeasuredCollective::all_gather:
      return {(n - 1) / n, costmodels::Collective::all_gather};
    case MeasuredCollective::reduce_scatter:
      return {(n - 1) / n, costmodels::Collective::reduce_scatter};
    case MeasuredCollective::send_receive:
      return {1, costmodels::Collective::broadcast};
  }
  return {};
}

// The latencies the cost models charge `sample`'s collective on one tier (a ring's 2(n−1) steps
// for an all-reduce, or a tree's 2·⌈log₂ n⌉ where fewer): its time there with a latency of one
// second and no transfer time. Asked of the cost models so the fit divides by what they multiply.
double latency_steps(const CollectiveSample& sample) {
  schemas::NetworkTier unit;
  unit.latency_us = 1e6;
  unit.bandwidth_gb_per_s = 1e30;
  unit.efficiency = 1;
  return predicted_collective_s(unit, sample);
}

}  // namespace

struct AttentionFit {
  double efficiency = 1, spread = 0;
};

// The efficiency of attention's products from samples of one kernel path (each sample's queries
// are seq / cp of its sequence, against all of it): time = products / (peak · efficiency) +
// exponentials, the exponentials at the special-function rate `gpu` already carries.
AttentionFit fit_attention(const std::vector<AttentionSample>& samples, schemas::Dtype precision,
                           const schemas::GpuProfile& gpu,
                           const std::map<std::string, double>& spread) {
  double products_at_peak_s = 0, remaining_s = 0, exponentials_total_s = 0, measured_s = 0;
  std::vector<double> spreads;
  schemas::GpuProfile at_peak = gpu;
  at_peak.attention_efficiency = 1.0;
  at_peak.kernel_launch_us.reset();
  schemas::GpuProfile no_exponentials = at_peak;
  no_exponentials.special_function_tops.reset();
  for (const AttentionSample& sample : samples) {
    const costmodels::AttentionShape shape{.batch = sample.batch,
                                           .heads = sample.heads,
                                           .query_tokens = sample.seq / sample.cp,
                                           .key_tokens = sample.seq,
                                           .head_dim = sample.head_dim};
    // Split the model's time at peak into its products and its exponentials.
    const costmodels::AttentionTime whole =
        costmodels::attention_time(at_peak, precision, schemas::AttentionKernel::flash, shape);
    const costmodels::AttentionTime products = costmodels::attention_time(
        no_exponentials, precision, schemas::AttentionKernel::flash, shape);
    const double exponentials_s =
        (whole.forward_s - products.forward_s) + (whole.backward_s - products.backward_s);
    const double sample_s = sample.forward.median_s + sample.backward.median_s;
    products_at_peak_s += products.forward_s + products.backward_s;
    exponentials_total_s += exponentials_s;
    measured_s += sample_s;
    remaining_s += std::max(sample_s - exponentials_s, 0.05 * sample_s);
    spreads.push_back(std::max(sample.forward.spread, sample.backward.spread));
  }
  // Its own repeats' noise plus what it inherits from the special-function rate, in the
  // proportion the exponentials take of its time.
  const auto special = spread.find("special_functions");
  const double inherited = special != spread.end()
                               ? special->second * exponentials_total_s /
                                     std::max(measured_s - exponentials_total_s, 1e-12)
                               : 0;
  return {.efficiency = std::clamp(products_at_peak_s / remaining_s, 1e-4, 1.0),
          .spread = median(spreads) + inherited};
}

void fit_compute(const ComputeMeasurements& measured, schemas::GpuProfile& gpu,
                 std::map<std::string, double>& spread) {
  // GEMMs: the peak and the curve from those whose dimensions suit the tensor-core kernels;
  // the others (an unpadded vocabulary's) as one factor on that curve.
  const bool any_aligned =
      std::any_of(measured.gemms.begin(), measured.gemms.end(), [&](const GemmSample& sample) {
        return costmodels::gemm_dimensions_aligned(measured.precision, sample.m, sample.n,
                                                   sample.k);
      });
  const auto aligned = [&](const GemmSample& sample) {
    return !any_aligned ||
           costmodels::gemm_dimensions_aligned(measured.precision, sample.m, sample.n, sample.k);
  };
  double peak = 0;
  std::vector<double> gemm_spreads;
  for (const GemmSample& sample : measured.gemms) {
    if (aligned(sample)) peak = std::max(peak, sample.flops() / sample.timing.median_s);
    gemm_spreads.push_back(sample.timing.spread);
  }
  std::vector<std::pair<double, double>> fractions;
  for (const GemmSample& sample : measured.gemms) {
    if (!aligned(sample)) continue;
    fractions.emplace_back(sample.flops(), sample.flops() / sample.timing.median_s / peak);
  }
  gpu.peak_dense_tflops = {{measured.precision, peak / 1e12}};
  gpu.gemm_efficiency_by_flops = banded_curve(std::move(fractions), 2.0);
  spread["gemm"] = median(gemm_spreads);
  std::vector<double> unaligned_ratios;
  for (const GemmSample& sample : measured.gemms) {
    if (aligned(sample)) continue;
    const double expected =
        peak * costmodels::interpolate_efficiency(gpu.gemm_efficiency_by_flops, sample.flops());
    unaligned_ratios.push_back(sample.flops() / sample.timing.median_s / expected);
  }
  gpu.unaligned_gemm_efficiency.reset();
  if (!unaligned_ratios.empty()) {
    gpu.unaligned_gemm_efficiency = std::clamp(median(unaligned_ratios), 1e-6, 1.0);
  }

  // Memory-bound kernels, those bound by their special functions, and dropout's random numbers.
  double plain_bytes = 0, plain_s = 0, special = 0, special_s = 0;
  std::vector<double> plain_spreads, special_spreads, random_spreads;
  for (const ElementwiseSample& sample : measured.elementwise) {
    if (sample.random_numbers > 0) continue;
    if (sample.special_functions > 0) {
      special += sample.special_functions;
      special_s += sample.timing.median_s;
      special_spreads.push_back(sample.timing.spread);
    } else {
      plain_bytes += sample.bytes;
      plain_s += sample.timing.median_s;
      plain_spreads.push_back(sample.timing.spread);
    }
  }
  gpu.hbm_bandwidth_gb_per_s = plain_bytes / plain_s / 1e9;
  gpu.hbm_efficiency_by_bytes.clear();
  spread["memory_bandwidth"] = median(plain_spreads);
  if (special_s > 0) {
    gpu.special_function_tops = special / special_s / 1e12;
    spread["special_functions"] = median(special_spreads);
  }
  // The cost models charge dropout's random numbers on top of the bytes of the kernel they are
  // fused into: the rate is what a dropout kernel takes beyond moving its bytes. On a CPU core
  // the generator is nearly all of it; on a GPU the bytes are most, and the rest is small (kept
  // at no less than a tenth of the kernel, so a kernel at the bandwidth does not read as free).
  double random = 0, random_s = 0;
  for (const ElementwiseSample& sample : measured.elementwise) {
    if (sample.random_numbers <= 0) continue;
    const double bytes_s = sample.bytes / (gpu.hbm_bandwidth_gb_per_s * 1e9);
    random += sample.random_numbers;
    random_s += std::max(sample.timing.median_s - bytes_s, 0.1 * sample.timing.median_s);
    random_spreads.push_back(sample.timing.spread);
  }
  if (random_s > 0) {
    gpu.random_number_tops = random / random_s / 1e12;
    spread["random_numbers"] = median(random_spreads);
  }

  // Attention: the efficiency of the products, with the exponentials charged as above — of the
  // whole-sequence kernel, and of context parallelism's blocks where they were measured.
  if (!measured.attention.empty()) {
    gpu.attention_efficiency.reset();
    const AttentionFit whole = fit_attention(measured.attention, measured.precision, gpu, spread);
    gpu.attention_efficiency = whole.efficiency;
    spread["attention"] = whole.spread;
  }
  if (!measured.context_parallel_attention.empty()) {
    const AttentionFit chunked =
        fit_attention(measured.context_parallel_attention, measured.precision, gpu, spread);
    gpu.context_parallel_attention_efficiency = chunked.efficiency;
    spread["context_parallel_attention"] = chunked.spread;
  }
  gpu.kernel_launch_us = measured.smallest_op.median_s * 1e6;
  spread["launch"] = measured.smallest_op.spread;
}

schemas::NetworkTier fit_tier(const TierMeasurements& measured, TierSpread& spread) {
  schemas::NetworkTier tier;
  tier.name = measured.name;
  tier.scope_gpus = measured.scope_ranks;
  // Latency: per collective and group size, the line through its two smallest messages' times
  // (steps · latency + volume · bytes / bandwidth) met at zero bytes, divided by the latency
  // steps the cost models charge it; the median over them. What the bandwidth curve leaves
  // unexplained it absorbs per size.
  std::map<std::pair<MeasuredCollective, int>, std::vector<const CollectiveSample*>> by_shape;
  for (const CollectiveSample& sample : measured.samples) {
    // The non-blocking all-reduce runs the blocking one's steps with more overhead of its own:
    // its curve takes that, the tier's latency is the blocking collectives'.
    if (sample.collective == MeasuredCollective::all_reduce_non_blocking) continue;
    by_shape[{sample.collective, sample.group_size}].push_back(&sample);
  }
  std::vector<double> latencies, latency_noises_s, spreads;
  for (auto& [shape, of_shape] : by_shape) {
    if (of_shape.size() < 2) continue;
    std::sort(of_shape.begin(), of_shape.end(),
              [](const auto* a, const auto* b) { return a->bytes < b->bytes; });
    const CollectiveSample& small = *of_shape[0];
    const CollectiveSample& next = *of_shape[1];
    if (next.bytes <= small.bytes) continue;
    const double per_byte_s =
        (next.timing.median_s - small.timing.median_s) / (next.bytes - small.bytes);
    const double intercept_s = small.timing.median_s - std::max(per_byte_s, 0.0) * small.bytes;
    const double steps = latency_steps(small);
    latencies.push_back(std::max(intercept_s, 0.0) / steps);
    // The intercept's noise in seconds: each time's own noise, through the line's lever
    // (intercept = t₁·b₂/(b₂−b₁) − t₂·b₁/(b₂−b₁)). A latency far below the smallest message's
    // time is a small difference of two noisy times: its relative noise is large, and the
    // spread must say so, or a second profile "disagrees" with this one by what is only noise.
    const double small_noise_s = small.timing.spread * small.timing.median_s;
    const double noise_s = per_byte_s > 0
                               ? (small_noise_s * next.bytes +
                                  next.timing.spread * next.timing.median_s * small.bytes) /
                                     (next.bytes - small.bytes)
                               : small_noise_s;
    latency_noises_s.push_back(noise_s / steps);
  }
  for (const CollectiveSample& sample : measured.samples) spreads.push_back(sample.timing.spread);
  const double latency_s = median(latencies);
  tier.latency_us = latency_s * 1e6;
  const double latency_noise_s = median(latency_noises_s);
  spread.latency = latency_s > 0         ? std::min(latency_noise_s / latency_s, kLargestSpread)
                   : latency_noise_s > 0 ? kLargestSpread
                                         : 0;
  // Bandwidth per message size: the volume over what the latency leaves; the peak is the best.
  // Each collective also gets its own curve: the communicator's algorithms need not share one
  // (MPI's reduce-scatter on a CPU sums on the host and moves its bus volume 2–4× slower than its
  // all-gather), and the cost models price each collective on its own where the tier has it.
  std::vector<std::pair<double, double>> bandwidths;
  std::map<schemas::TierCollective, std::vector<std::pair<double, double>>> by_collective;
  // The peak is the fastest of the transfers that dominate their time: where the latency is
  // most of a time, what is left of it is too small to divide by. A message faster than the peak
  // after its latency gets the whole peak.
  double best = 0, best_any = 0;
  for (const CollectiveSample& sample : measured.samples) {
    const CollectiveShape shape = shape_of(sample);
    const double transfer_s = sample.timing.median_s - latency_steps(sample) * latency_s;
    const double bandwidth = transfer_s > 0 ? shape.volume * sample.bytes / transfer_s
                                            : std::numeric_limits<double>::infinity();
    by_collective[sample.collective].emplace_back(sample.bytes, bandwidth);
    // The non-blocking all-reduce has a curve of its own only: the tier's curve and peak stand
    // for the blocking collectives that have none.
    if (sample.collective == MeasuredCollective::all_reduce_non_blocking) continue;
    bandwidths.emplace_back(sample.bytes, bandwidth);
    if (std::isfinite(bandwidth)) best_any = std::max(best_any, bandwidth);
    if (transfer_s >= 0.5 * sample.timing.median_s) best = std::max(best, bandwidth);
  }
  if (best == 0) best = best_any;
  for (auto& [bytes, bandwidth] : bandwidths) bandwidth /= best;
  tier.bandwidth_gb_per_s = best / 1e9;
  tier.efficiency_by_message_bytes = banded_curve(std::move(bandwidths), 1.5);
  for (auto& [collective, samples] : by_collective) {
    for (auto& [bytes, bandwidth] : samples) bandwidth /= best;
    tier.efficiency_by_collective[collective] = banded_curve(std::move(samples), 1.5);
  }
  tier.efficiency = tier.efficiency_by_message_bytes.empty()
                        ? 1.0
                        : tier.efficiency_by_message_bytes.back().fraction;
  spread.bandwidth = median(spreads);
  return tier;
}

double predicted_collective_s(const schemas::NetworkTier& tier, const CollectiveSample& sample) {
  schemas::ClusterConfig cluster;
  cluster.nodes = 1;
  cluster.gpus_per_node = sample.group_size;
  schemas::NetworkTier whole = tier;
  whole.scope_gpus = sample.group_size;
  cluster.network_tiers = {whole};
  if (sample.collective == MeasuredCollective::send_receive) {
    return costmodels::point_to_point_time_s(cluster, 0, sample.bytes);
  }
  std::vector<std::int64_t> ranks(static_cast<std::size_t>(sample.group_size));
  std::iota(ranks.begin(), ranks.end(), 0);
  return costmodels::collective_time_s(cluster, costmodels::group_span(cluster, ranks),
                                       shape_of(sample).collective, sample.bytes);
}

}  // namespace strata::profiler
