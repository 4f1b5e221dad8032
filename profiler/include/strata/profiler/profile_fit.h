// From measurements to the cluster format: each parameter is fitted so that the cost models'
// own formulas (costmodels/kernel_time.h, attention_time.h, collective_time.h) reproduce what
// was measured — the same arithmetic backwards, not a separate model of the machine.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "strata/profiler/compute_measurements.h"
#include "strata/profiler/network_measurements.h"
#include "strata/schemas/cluster_config.h"

namespace strata::profiler {

// The compute half of a GPU profile (name, memory and description are the caller's):
//   peak          the fastest GEMM measured, in the measurements' precision (fp32 on a CPU, the
//                 training precision on a GPU); gemm_efficiency: the median fraction of it per
//                 factor-of-two band of FLOPs (wave quantization included: a measured profile
//                 names no SM count, so the cost models add none on top), from the GEMMs whose
//                 dimensions are 16-byte multiples; unaligned_gemm_efficiency: the median of the
//                 others' rates over that curve's (absent when every GEMM was aligned)
//   HBM bandwidth bytes over time of the kernels without special functions (norms, residuals,
//                 AdamW): what the backend's memory-bound kernels reach, not a copy loop's peak
//   special functions  evaluations over time of the kernels bound by them (GELU, SwiGLU's
//                 sigmoid, the loss's exponentials): the rate costmodels charge them at
//   attention     the efficiency whose flash-attention time, with those exponentials, gives the
//                 measured forward + backward time
//   random numbers  dropout's time beyond its bytes at that bandwidth, per keep decision
//   launch        the one-element op
// `spread` gets one relative noise figure per fitted quantity.
void fit_compute(const ComputeMeasurements& measured, schemas::GpuProfile& gpu,
                 std::map<std::string, double>& spread);

// One network tier from its collectives: latency from the smallest messages (the ring's steps),
// bandwidth from the fastest (the nccl-tests bus-bandwidth volume), and per collective the
// efficiency by message size that makes collective_time_s give each measured time (plus one
// curve over all of them, the median per size band, for what the tier carries unmeasured).
//
// Each fitted quantity's relative noise: the bandwidth's is the median spread of the samples'
// times; the latency's is what those spreads make of the zero-byte intercept it is read from
// (sources.spread "tier_N" and "tier_N_latency"), up to kLargestSpread.
struct TierSpread {
  double bandwidth = 0;
  double latency = 0;
};
inline constexpr double kLargestSpread = 1000;  // the cluster schema's bound for a spread
schemas::NetworkTier fit_tier(const TierMeasurements& measured, TierSpread& spread);

// What the cost models predict for one measured collective on a tier (for the report).
double predicted_collective_s(const schemas::NetworkTier& tier, const CollectiveSample& sample);

}  // namespace strata::profiler
