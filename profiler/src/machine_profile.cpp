#include "strata/profiler/machine_profile.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <stdexcept>

#include "strata/executor/cuda/cuda_device.h"
#include "strata/profiler/communicator_memory.h"
#include "strata/profiler/machine_layout.h"
#include "strata/profiler/profile_fit.h"
#include "strata/schemas/presets.h"

namespace strata::profiler {
namespace {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

// The ranks' measurements averaged (medians) and their spreads the largest: each rank measured
// the same list, at once.
void average_over_ranks(executor::Communicator& world, ComputeMeasurements& compute) {
  const std::vector<Timing*> timings = timings_of(compute);
  const auto n = static_cast<std::int64_t>(timings.size());
  executor::Tensor medians = executor::Tensor::zeros({n}, executor::ScalarType::float64);
  executor::Tensor spreads = executor::Tensor::zeros({n}, executor::ScalarType::float64);
  for (std::int64_t i = 0; i < n; ++i) {
    medians.data<double>()[i] = timings[static_cast<std::size_t>(i)]->median_s;
    spreads.data<double>()[i] = timings[static_cast<std::size_t>(i)]->spread;
  }
  world.all_reduce(medians, executor::ReduceOp::sum);
  world.all_reduce(spreads, executor::ReduceOp::max);
  for (std::int64_t i = 0; i < n; ++i) {
    timings[static_cast<std::size_t>(i)]->median_s = medians.data<double>()[i] / world.size();
    timings[static_cast<std::size_t>(i)]->spread = spreads.data<double>()[i];
  }
}

std::int64_t memory_per_rank(int ranks_per_host) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return static_cast<std::int64_t>(pages) * page / ranks_per_host;
}

}  // namespace

MachineProfile profile_machine(executor::Communicator& world, const MachineLayout& layout,
                               const ProfileSettings& settings, const std::string& name,
                               const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  MachineProfile profile;
  settings.report(fmt::format("profiling {} rank(s): {} node(s) of {} on {} host(s)", world.size(),
                              layout.nodes, layout.ranks_per_node, layout.hosts.size()));
  profile.compute = measure_compute(settings);
  average_over_ranks(world, profile.compute);
  profile.network = measure_network(world, layout, settings);
  profile.network_measured = !profile.network.empty();
  if (world.size() > 1) {
    // Large enough that every temporary is mapped afresh rather than recycled from the heap
    // (glibc maps blocks from 32 MiB up), small enough beside each rank's share of memory.
    const double message = std::min(
        128.0 * (1 << 20), static_cast<double>(memory_per_rank(layout.ranks_per_node)) / 16.0);
    settings.report(fmt::format("measuring the communicator's temporaries on {:.0f} MiB messages",
                                message / (1 << 20)));
    if (auto ratios = measure_communicator_temporaries(world, message)) {
      profile.cluster.communicator_temporary_bytes_per_byte = std::move(*ratios);
    } else {
      settings.report(
          "  not measured: this kernel does not let the peak resident set be restarted");
    }
  }
  if (world.size() > 1) {
    // A gradient bucket's size class (16 MiB): long enough to see whether it moves meanwhile.
    settings.report("measuring whether a non-blocking all-reduce advances while the ranks compute");
    profile.progress = measure_communicator_progress(world, 16.0 * (1 << 20), settings.repeats);
    profile.cluster.communicator_progress_during_compute = profile.progress->fraction;
  }
  // The compute sweep again: what the machine did while it was measured (see
  // merge_repeated_sweep).
  settings.report("measuring compute again, to see how the machine drifted meanwhile");
  ComputeMeasurements again = measure_compute(settings);
  average_over_ranks(world, again);
  profile.compute_drift = merge_repeated_sweep(profile.compute, again);

  schemas::ClusterConfig& cluster = profile.cluster;
  cluster.name = name;
  cluster.nodes = layout.nodes;
  cluster.gpus_per_node = layout.ranks_per_node;
  schemas::MeasuredSources sources;
  fit_compute(profile.compute, cluster.gpu, sources.spread);
  sources.spread["compute_drift"] = std::abs(profile.compute_drift);
  if (profile.progress) {
    sources.spread["communicator_progress"] =
        std::max(profile.progress->alone.spread, profile.progress->wait_after.spread);
  }
  if (settings.device == executor::Device::cuda) {
    std::string why_not;
    const std::optional<executor::CudaDeviceInfo> device = executor::cuda_device_info(&why_not);
    if (!device) throw std::runtime_error("profile: no GPU to profile (" + why_not + ")");
    cluster.gpu.name = device->name;
    cluster.gpu.memory_bytes = static_cast<std::int64_t>(device->memory_bytes);
    cluster.gpu.description = fmt::format(
        "{} (compute capability {}.{}, {} SMs) through Strata's CUDA backend, measured by strata "
        "profile with the executor's own ops: {} GEMMs (cuBLASLt) over transformer layer shapes "
        "of GPT-2 124M to an 8B model at tp 1-8, its flash attention, the memory-bound kernels "
        "and one-element ops. No SM count is named: the GEMM curve was measured with wave "
        "quantization in it",
        device->name, device->compute_capability_major, device->compute_capability_minor,
        device->streaming_multiprocessors,
        schemas::name_of(profile.compute.precision, schemas::kDtypeNames));
  } else {
    cluster.gpu.name = "cpu-rank";
    cluster.gpu.memory_bytes =
        memory_per_rank(static_cast<int>(world.size() / layout.hosts.size()));
    cluster.gpu.description = fmt::format(
        "One MPI rank of the CPU backend ({} thread(s) for its GEMMs), measured by strata profile "
        "with the executor's own ops: fp32 GEMMs over transformer layer shapes, causal attention "
        "(whole, and block by block as a context-parallel rank runs it), the memory-bound kernels "
        "and one-element ops",
        profile.compute.threads);
  }
  for (std::size_t i = 0; i < profile.network.size(); ++i) {
    TierSpread spread;
    cluster.network_tiers.push_back(fit_tier(profile.network[i], spread));
    sources.spread["tier_" + std::to_string(i)] = spread.bandwidth;
    sources.spread["tier_" + std::to_string(i) + "_latency"] = spread.latency;
  }
  if (cluster.network_tiers.empty()) {
    // One rank: nothing to measure between ranks. The tier is a placeholder a plan of one rank
    // never uses.
    cluster.network_tiers = schemas::cluster_preset("cpu-local").network_tiers;
  }
  cluster.network_tiers.back().scope_gpus = cluster.world_size();
  cluster.description =
      settings.device == executor::Device::cuda
          ? fmt::format(
                "Measured by strata profile --device cuda: one {} (compute only; the "
                "network tier is the cpu-local preset's placeholder, which a plan of one "
                "GPU never uses)",
                cluster.gpu.name)
      : profile.network_measured
          ? fmt::format("Measured by strata profile: {} rank(s), {} node(s) of {}", world.size(),
                        layout.nodes, layout.ranks_per_node)
          : "Measured by strata profile on one rank: compute only; the network tier is the "
            "cpu-local preset's (not measured: run under mpirun -np N to measure it)";
  sources.measured_by = "strata profile";
  sources.date = utc_now();
  sources.command = command;
  sources.hosts = layout.hosts;
  sources.backend = settings.device == executor::Device::cuda ? "cuda" : "cpu";
  sources.ranks = world.size();
  sources.threads_per_rank = profile.compute.threads;
  sources.duration_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  cluster.sources = std::move(sources);
  return profile;
}

}  // namespace strata::profiler
