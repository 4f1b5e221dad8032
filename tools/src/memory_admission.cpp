#include "memory_admission.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/distributed/typed_collectives.h"
#include "strata/executor/train/resident_memory.h"
#include "strata/schemas/input_error.h"

namespace strata::tools {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A number from the first line of `path` ("max" and unreadable files: none).
std::optional<double> first_number(const char* path) {
  std::ifstream file(path);
  std::string word;
  if (!(file >> word) || word == "max") return std::nullopt;
  try {
    return std::stod(word);
  } catch (...) {
    return std::nullopt;
  }
}

// This host, as a number a double holds exactly (ranks compare it after an all-gather).
double host_key() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return static_cast<double>(std::hash<std::string>{}(host) & ((std::uint64_t{1} << 52) - 1));
}

}  // namespace

AvailableMemory available_host_memory() {
  AvailableMemory available{static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                                static_cast<double>(::sysconf(_SC_PAGE_SIZE)),
                            "physical memory"};
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kib = 0;
    if (key == "MemAvailable:" && meminfo >> kib) {
      available = {kib * 1024, "MemAvailable"};
      break;
    }
    meminfo.ignore(1 << 10, '\n');
  }
  // A container's limit (cgroup v2) is what its processes may take, whatever the host has.
  const std::optional<double> limit = first_number("/sys/fs/cgroup/memory.max");
  const std::optional<double> used = first_number("/sys/fs/cgroup/memory.current");
  if (limit && used && *limit - *used < available.bytes) {
    available = {std::max(0.0, *limit - *used), "the cgroup's memory.max less memory.current"};
  }
  return available;
}

void check_host_memory(const simulator::RankMemory& rank, executor::Communicator& world) {
  // What this process already holds (the program, MPI, the data file) beside what the plan adds.
  const double process_bytes = static_cast<double>(executor::current_resident_bytes());
  const double need = rank.peak_bytes + process_bytes;
  struct RankNeed {
    double host = 0;   // host_key() of the rank's host
    double bytes = 0;  // what the rank needs
  };
  const RankNeed mine{host_key(), need};
  double host_need = 0;
  int host_ranks = 0;
  for (const RankNeed& other : executor::all_gather_records(world, mine)) {
    if (other.host != mine.host) continue;
    host_need += other.bytes;
    ++host_ranks;
  }
  const AvailableMemory available = available_host_memory();
  if (host_need <= available.bytes) return;
  throw schemas::InputError(
      "--memory-check", "",
      fmt::format(
          "this host's {} rank(s) need {:.1f} GiB but {:.1f} GiB are available ({}); a rank: "
          "{:.2f} GiB = weights {:.2f} + gradients {:.2f} + optimizer {:.2f} + activations "
          "{:.2f} + communicator {:.2f} (the simulator's peak for the plan) + this process "
          "{:.2f}. Lower batch.micro_batch_size or seq_length, raise zero_stage, tp or pp, "
          "spread the ranks over more hosts, or pass --memory-check off",
          host_ranks, host_need / kGiB, available.bytes / kGiB, available.source, need / kGiB,
          rank.weights_bytes / kGiB, rank.gradients_bytes / kGiB, rank.optimizer_bytes / kGiB,
          rank.activations_peak_bytes / kGiB, rank.communicator_bytes / kGiB,
          process_bytes / kGiB));
}

void check_device_memory(const simulator::RankMemory& rank, double free_bytes, double total_bytes,
                         const std::string& device_name) {
  if (rank.peak_bytes <= free_bytes) return;
  throw schemas::InputError(
      "--memory-check", "",
      fmt::format("the GPU ({}) has {:.1f} GiB free of {:.1f} GiB but a rank needs {:.2f} GiB = "
                  "weights {:.2f} + gradients {:.2f} + optimizer {:.2f} + activations {:.2f} + "
                  "communicator {:.2f} (the simulator's peak for the plan). Lower "
                  "batch.micro_batch_size or seq_length, raise zero_stage, tp or pp, free the "
                  "GPU of other processes, or pass --memory-check off",
                  device_name, free_bytes / kGiB, total_bytes / kGiB, rank.peak_bytes / kGiB,
                  rank.weights_bytes / kGiB, rank.gradients_bytes / kGiB,
                  rank.optimizer_bytes / kGiB, rank.activations_peak_bytes / kGiB,
                  rank.communicator_bytes / kGiB));
}

void check_gpu_memory(const simulator::RankMemory& rank) {
  std::string why_not;
  const std::optional<executor::CudaDeviceInfo> device = executor::cuda_device_info(&why_not);
  const std::optional<executor::DeviceMemoryAvailable> available =
      executor::cuda_memory_available();
  // Without a GPU the trainer refuses with the reason; there is nothing to admit against.
  if (!device || !available) return;
  check_device_memory(rank, static_cast<double>(available->free_bytes),
                      static_cast<double>(available->total_bytes), device->name);
}

}  // namespace strata::tools
