#include "strata/profiler/network_measurements.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace strata::profiler {
namespace {

using executor::Tensor;

std::vector<double> message_bytes(const ProfileSettings& settings) {
  std::vector<double> sizes;
  const double step = settings.quick ? 16 : 4;
  for (double bytes = 4096; bytes <= 64.0 * (1 << 20); bytes *= step) sizes.push_back(bytes);
  return sizes;
}

// Times `run` on every member of `group`: a barrier lines the members up, each times `batch`
// runs, and the sample is the slowest member's (a collective ends when its last member does).
Timing time_collective(executor::Communicator& group, const std::function<void()>& run, int repeats,
                       double expected_s) {
  using Clock = std::chrono::steady_clock;
  const int batch =
      expected_s >= 2e-3 ? 1 : static_cast<int>(2e-3 / std::max(expected_s, 1e-7)) + 1;
  run();  // warm-up: connections, buffers
  Tensor samples = Tensor::zeros({repeats}, executor::ScalarType::float64);
  for (int i = 0; i < repeats; ++i) {
    group.barrier();
    const Clock::time_point start = Clock::now();
    for (int j = 0; j < batch; ++j) run();
    samples.data<double>()[i] = std::chrono::duration<double>(Clock::now() - start).count() / batch;
  }
  group.all_reduce(samples, executor::ReduceOp::max);
  return summarise(std::vector<double>(samples.data<double>(), samples.data<double>() + repeats));
}

// Every collective over `group` at every message size; send/receive between its pairs too where
// `pairs`.
std::vector<CollectiveSample> measure_group(executor::Communicator& group,
                                            const ProfileSettings& settings,
                                            const std::string& group_label, bool pairs,
                                            bool report) {
  std::vector<CollectiveSample> samples;
  const int n = group.size();
  const std::vector<double> sizes = message_bytes(settings);
  std::size_t done = 0;
  for (const double bytes : sizes) {
    if (settings.interrupted && settings.interrupted()) throw ProfileInterrupted{};
    if (report) {
      settings.report(
          fmt::format("{} {}/{}: {:.0f} KiB", group_label, ++done, sizes.size(), bytes / 1024));
    }
    const auto elements = static_cast<std::int64_t>(bytes / 4) / n * n;
    // A first guess of the time for the batch size: 1 GB/s and 20 µs.
    const double guess_s = 2e-5 + bytes / 1e9;
    Tensor whole = Tensor::zeros({elements}, executor::ScalarType::float32);
    Tensor part = Tensor::zeros({elements / n}, executor::ScalarType::float32);
    const double actual = static_cast<double>(elements) * 4;
    samples.push_back({MeasuredCollective::all_reduce, n, actual,
                       time_collective(
                           group, [&] { group.all_reduce(whole, executor::ReduceOp::sum); },
                           settings.repeats, guess_s)});
    // Started and then waited for, as the gradient buckets run it: Open MPI's non-blocking
    // collectives are another component (libnbc) with their own algorithms and speed.
    samples.push_back(
        {MeasuredCollective::all_reduce_non_blocking, n, actual,
         time_collective(
             group, [&] { group.all_reduce_async(whole, executor::ReduceOp::sum).wait(); },
             settings.repeats, guess_s)});
    samples.push_back(
        {MeasuredCollective::all_gather, n, actual,
         time_collective(
             group, [&] { group.all_gather(part, whole); }, settings.repeats, guess_s)});
    samples.push_back(
        {MeasuredCollective::reduce_scatter, n, actual,
         time_collective(
             group, [&] { group.reduce_scatter(whole, part); }, settings.repeats, guess_s)});
    // One message from each even member to the odd one after it, as a pipeline stage sends its
    // activations to the next (an odd last member waits at the barrier). The same pairs in every
    // group shape: measured with the first only.
    if (!pairs) continue;
    const int rank = group.rank();
    const int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
    samples.push_back({MeasuredCollective::send_receive, 2, actual,
                       time_collective(
                           group,
                           [&] {
                             if (peer >= n) return;
                             if (rank % 2 == 0) {
                               group.send_async(whole, peer, 7).wait();
                             } else {
                               group.receive_async(whole, peer, 7).wait();
                             }
                           },
                           settings.repeats, guess_s)});
  }
  return samples;
}

}  // namespace

std::string_view collective_name(MeasuredCollective collective) {
  switch (collective) {
    case MeasuredCollective::all_reduce:
      return "all-reduce";
    case MeasuredCollective::all_gather:
      return "all-gather";
    case MeasuredCollective::reduce_scatter:
      return "reduce-scatter";
    case MeasuredCollective::send_receive:
      return "send/receive";
    case MeasuredCollective::all_reduce_non_blocking:
      return "non-blocking all-reduce";
  }
  return "?";
}

std::vector<int> measured_group_sizes(int members) {
  std::vector<int> sizes;
  for (int size = 2; size < members; size *= 2) {
    if (members % size == 0) sizes.push_back(size);
  }
  if (members > 1) sizes.push_back(members);
  return sizes;
}

namespace {

// Every group size of a tier's `members` (numbered 0 … members−1 in `tier_group`), each size's
// groups of consecutive members measured at once.
std::vector<CollectiveSample> measure_group_shapes(executor::Communicator& tier_group,
                                                   const ProfileSettings& settings,
                                                   const std::string& tier_label, bool report) {
  std::vector<CollectiveSample> samples;
  const int member = tier_group.rank();
  const std::vector<int> sizes = measured_group_sizes(tier_group.size());
  for (const int size : sizes) {
    std::unique_ptr<executor::Communicator> group = tier_group.split(member / size, member % size);
    std::vector<CollectiveSample> of_size =
        measure_group(*group, settings, fmt::format("{}, groups of {} ranks", tier_label, size),
                      size == sizes.front(), report);
    samples.insert(samples.end(), of_size.begin(), of_size.end());
  }
  return samples;
}

}  // namespace

std::vector<TierMeasurements> measure_network(executor::Communicator& world,
                                              const MachineLayout& layout,
                                              const ProfileSettings& settings) {
  std::vector<TierMeasurements> tiers;
  const int rank = world.rank();
  const int local_rank = rank % layout.ranks_per_node;
  const int host = layout.node_of_rank(rank);
  if (layout.ranks_per_node > 1) {
    // Inside a node. Every node measures at once (as training loads them).
    std::unique_ptr<executor::Communicator> node = world.split(host, local_rank);
    TierMeasurements tier{
        "shared-memory", layout.ranks_per_node, measured_group_sizes(layout.ranks_per_node), {}};
    tier.samples = measure_group_shapes(*node, settings, "inside a node", rank == 0);
    tiers.push_back(std::move(tier));
  }
  if (layout.nodes > 1) {
    // Across nodes: one rank per node, the others idle.
    std::unique_ptr<executor::Communicator> across = world.split(local_rank, host);
    TierMeasurements tier{"network", world.size(), measured_group_sizes(layout.nodes), {}};
    if (local_rank == 0) {
      tier.samples = measure_group_shapes(*across, settings, "across nodes", rank == 0);
    }
    world.barrier();
    tiers.push_back(std::move(tier));
  }
  return tiers;
}

}  // namespace strata::profiler
