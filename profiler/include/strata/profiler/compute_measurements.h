// The device's compute, measured with the executor's own ops (what a training step runs, on the
// backend it runs on): GEMMs over the shapes transformer layers produce, causal attention
// forward and backward over sequence length and head dimension, the memory-bound kernels
// (norms, residuals, activations, the loss, AdamW) and the fixed cost of one op.
#pragma once

#include <string>
#include <vector>

#include "strata/profiler/profile_settings.h"
#include "strata/profiler/repeated_timing.h"
#include "strata/schemas/dtype.h"

namespace strata::profiler {

// C[m×n] = A[m×k]·B[k×n] in the profile's precision, as a linear layer's forward, input gradient or
// weight gradient.
struct GemmSample {
  double m = 0, n = 0, k = 0;
  Timing timing;
  double flops() const { return 2 * m * n * k; }
};

// One memory-bound kernel: the bytes it reads and writes, the special functions (exp, tanh) it
// evaluates and the random numbers it generates (dropout), as the cost models count them.
struct ElementwiseSample {
  std::string kernel;  // "layer_norm forward", "gelu backward", "adamw", ...
  double bytes = 0;
  double special_functions = 0;
  double random_numbers = 0;
  Timing timing;
};

struct AttentionSample {
  double batch = 0, heads = 0, seq = 0, head_dim = 0;
  Timing forward, backward;
  // The context-parallel group whose first rank's attention this times, block by block against
  // every rank's keys (1: the whole-sequence kernel); its queries are seq / cp of the sequence.
  double cp = 1;
};

struct ComputeMeasurements {
  std::vector<GemmSample> gemms;
  std::vector<ElementwiseSample> elementwise;
  std::vector<AttentionSample> attention;
  std::vector<AttentionSample> context_parallel_attention;
  Timing smallest_op;  // a one-element op: the fixed cost of any kernel
  int threads = 1;     // the threads the backend's GEMMs use (the CPU's)
  executor::Device device = executor::Device::cpu;
  // The activations' and GEMMs' type: the peak the fit writes is this dtype's.
  schemas::Dtype precision = schemas::Dtype::fp32;
};

ComputeMeasurements measure_compute(const ProfileSettings& settings);

// Every timing of a compute sweep, in one order (the same for two sweeps of one profile).
std::vector<Timing*> timings_of(ComputeMeasurements& measured);

// A profile measures its compute twice, at its start and at its end, because a shared machine
// drifts while it is measured (other jobs, clocks, thermal limits) and repeats inside one sweep
// cannot see that. Merges `end` into `start`: each median the mean of the two, each spread the
// largest of the two sweeps' and half their relative difference — so a second profile should
// agree within the spread this one reports. Returns the machine's drift: the median over the
// timings of end / start − 1 (positive: it slowed).
double merge_repeated_sweep(ComputeMeasurements& start, ComputeMeasurements& end);

}  // namespace strata::profiler
