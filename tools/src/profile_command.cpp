// `strata profile [--out cluster.json] [--quick]`: measures the machine it runs on — one process,
// or every rank of an mpirun job at once — and writes a cluster file fitted to it, then prints
// what was measured beside the closest preset. `strata plan --cluster cluster.json` and `strata
// train` then plan and run for this machine, with each step's prediction beside its measurement.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "commands.h"
#include "job_phase.h"
#include "output_check.h"
#include "stall_timeout_option.h"
#include "strata/executor/cuda/cuda_device.h"
#include "strata/profiler/machine_profile.h"
#include "strata/profiler/preset_comparison.h"
#include "strata/profiler/profile_fit.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"

namespace strata::tools {
namespace {

volatile std::sig_atomic_t interrupt_signal = 0;

extern "C" void remember_interrupt(int signal) { interrupt_signal = signal; }

// SIGINT and SIGTERM stop the profile between two measurements (an interrupted profile writes
// nothing); the previous handlers come back when the profile ends.
class InterruptWatch {
 public:
  InterruptWatch() {
    interrupt_signal = 0;
    struct sigaction action {};
    action.sa_handler = remember_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_interrupt_);
    sigaction(SIGTERM, &action, &previous_terminate_);
  }
  ~InterruptWatch() {
    sigaction(SIGINT, &previous_interrupt_, nullptr);
    sigaction(SIGTERM, &previous_terminate_, nullptr);
  }
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

 private:
  struct sigaction previous_interrupt_ {};
  struct sigaction previous_terminate_ {};
};

std::string format_value(double value) {
  if (value == 0) return "-";
  if (value >= 100) return fmt::format("{:.0f}", value);
  if (value >= 1) return fmt::format("{:.2f}", value);
  return fmt::format("{:.3g}", value);
}

void print_text(const profiler::MachineProfile& profile, const profiler::PresetComparison& closest,
                const std::string& out, double seconds) {
  const schemas::ClusterConfig& cluster = profile.cluster;
  if (cluster.sources->backend == "cuda") {
    fmt::print("measured one GPU ({}) in {:.1f} s; wrote {}\n", cluster.gpu.name, seconds, out);
  } else {
    fmt::print(
        "measured {} rank(s) ({} node(s) of {}, {} GEMM thread(s) each) in {:.1f} s; "
        "wrote {}\n",
        cluster.world_size(), cluster.nodes, cluster.gpus_per_node,
        cluster.sources->threads_per_rank, seconds, out);
  }
  if (!profile.network_measured && cluster.sources->backend != "cuda") {
    fmt::print("network not measured (one rank): run under mpirun -np N to measure it\n");
  }
  // A second profile agrees with this one within the spreads below only if the machine holds
  // still; the drift says how much it moved while this one ran (it is in the spreads).
  fmt::print("compute drift from the profile's start to its end: {:+.1f}% (in each spread)\n",
             100 * profile.compute_drift);
  fmt::print("\n{:<36} {:>10} {:>8} {:>14} {:>9}\n", "quantity", "measured", "spread",
             closest.preset, "ratio");
  for (const profiler::ComparedQuantity& row : closest.rows) {
    fmt::print("{:<36} {:>10} {:>8} {:>14} {:>9}\n", row.quantity, format_value(row.measured),
               fmt::format("±{:.1f}%", 100 * row.spread), format_value(row.preset),
               row.preset > 0 ? fmt::format("×{:.3g}", row.measured / row.preset) : "-");
  }
  if (!cluster.communicator_temporary_bytes_per_byte.empty()) {
    // What the simulator adds to a rank's peak for the communicator's own buffers.
    fmt::print("\ncommunicator temporaries, bytes held per byte of a message:");
    for (const auto& [operation, ratio] : cluster.communicator_temporary_bytes_per_byte) {
      fmt::print(" {} {:.2f}", schemas::name_of(operation, schemas::kCommunicatorOperationNames),
                 ratio);
    }
    fmt::print("\n");
  }
  if (profile.progress) {
    // What a gradient bucket's all-reduce issued during the backward can hide.
    const profiler::ProgressMeasurement& progress = *profile.progress;
    fmt::print(
        "communicator progress during compute: {:.2f} (a 16 MiB non-blocking all-reduce: {:.1f} ms "
        "alone, {:.1f} ms still to wait after computing for twice that)\n",
        progress.fraction, 1e3 * progress.alone.median_s, 1e3 * progress.wait_after.median_s);
  }
  for (std::size_t i = 0; i < profile.network.size(); ++i) {
    const profiler::TierMeasurements& tier = profile.network[i];
    fmt::print("\ntier {} ({}, groups of {} ranks): measured / fitted collective times\n", i,
               tier.name, fmt::join(tier.group_sizes, ", "));
    fmt::print("{:<23} {:>5} {:>12} {:>12} {:>12} {:>8}\n", "collective", "ranks", "bytes",
               "measured µs", "fitted µs", "ratio");
    for (const profiler::CollectiveSample& sample : tier.samples) {
      const double fitted = profiler::predicted_collective_s(cluster.network_tiers[i], sample);
      fmt::print("{:<23} {:>5} {:>12.0f} {:>12.1f} {:>12.1f} {:>8}\n",
                 profiler::collective_name(sample.collective), sample.group_size, sample.bytes,
                 sample.timing.median_s * 1e6, fitted * 1e6,
                 fmt::format("×{:.2f}", sample.timing.median_s / fitted));
    }
  }
}

void print_json(const profiler::MachineProfile& profile, const profiler::PresetComparison& closest,
                const std::string& out, double seconds) {
  nlohmann::json rows = nlohmann::json::array();
  for (const profiler::ComparedQuantity& row : closest.rows) {
    rows.push_back({{"quantity", row.quantity},
                    {"measured", row.measured},
                    {"spread", row.spread},
                    {"preset", row.preset}});
  }
  nlohmann::json tiers = nlohmann::json::array();
  for (std::size_t i = 0; i < profile.network.size(); ++i) {
    nlohmann::json samples = nlohmann::json::array();
    for (const profiler::CollectiveSample& sample : profile.network[i].samples) {
      samples.push_back({{"collective", profiler::collective_name(sample.collective)},
                         {"group_size", sample.group_size},
                         {"bytes", sample.bytes},
                         {"measured_s", sample.timing.median_s},
                         {"spread", sample.timing.spread},
                         {"fitted_s", profiler::predicted_collective_s(
                                          profile.cluster.network_tiers[i], sample)}});
    }
    tiers.push_back({{"name", profile.network[i].name},
                     {"group_sizes", profile.network[i].group_sizes},
                     {"samples", samples}});
  }
  nlohmann::json report{{"out", out},
                        {"seconds", seconds},
                        {"network_measured", profile.network_measured},
                        {"compute_drift", profile.compute_drift},
                        {"closest_preset", closest.preset},
                        {"quantities", rows},
                        {"tiers", tiers}};
  if (profile.progress) {
    report["communicator_progress"] = {{"fraction", profile.progress->fraction},
                                       {"alone_s", profile.progress->alone.median_s},
                                       {"wait_after_s", profile.progress->wait_after.median_s}};
  }
  std::cout << report.dump() << "\n";
}

}  // namespace

CLI::App* add_profile_command(CLI::App& app, ProfileOptions& options) {
  CLI::App* command = app.add_subcommand(
      "profile",
      "Measure this machine (under mpirun: every rank and the network between them) into a "
      "cluster file");
  command->add_option("--out", options.out, "The cluster file to write")->capture_default_str();
  command->add_flag("--quick", options.quick, "A coarse profile in about a minute");
  command
      ->add_option("--device", options.device,
                   "cpu (the CPU backend's ops, every rank of an mpirun job) or cuda (the CUDA "
                   "backend's ops on this process's GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  command
      ->add_option("--precision", options.precision,
                   "The GEMMs' and activations' type: fp32, or bf16 mixed precision on cuda "
                   "(default there)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->option_text("fp32|bf16");
  command->add_option("--name", options.name, "The cluster's name (default: measured-HOST)");
  command
      ->add_option("--gpus-per-node", options.gpus_per_node,
                   "Ranks that form one node (default: the ranks sharing a host)")
      ->check(whole_number_from(1, 1024));
  command
      ->add_option_function<std::string>(
          "--log-format",
          [&options](const std::string& name) {
            options.log_format = name == "json" ? LogFormat::json : LogFormat::text;
          },
          "text (default: a table) or json (one object)")
      ->check(CLI::IsMember({"text", "json"}))
      ->option_text("text|json");
  add_stall_timeout_option(*command, options.stall_timeout_s);
  return command;
}

int run_profile(const ProfileOptions& options, const std::string& command_line) {
  executor::Communicator& world = executor::world_communicator();
  const bool logs = world.rank() == 0;
  // The network measurement waits on every peer: one that stopped ends the job, not hangs it.
  arm_stall_timeout(world, options.stall_timeout_s);
  try {
    // Refusals every rank must agree on before any rank starts measuring.
    profiler::MachineLayout layout;
    run_phase(world, [&] {
      // The layout's all-gather first: a rank that throws before it would leave the others in it.
      layout = profiler::discover_machine_layout(
          world, options.gpus_per_node
                     ? std::optional<int>(static_cast<int>(*options.gpus_per_node))
                     : std::nullopt);
      if (logs) check_output_file(options.out, "--out");
      if (options.device == "cuda") {
        // The network between GPUs is measured through NCCL, which the executor does not use
        // yet: a GPU profile is one GPU's compute.
        if (world.size() > 1) {
          throw schemas::InputError(
              "--device", "",
              fmt::format("cuda: a GPU profile measures one GPU; run it without mpirun (this "
                          "job has {} ranks)",
                          world.size()));
        }
        std::string why_not;
        if (!executor::cuda_device_info(&why_not)) {
          throw schemas::InputError("--device", "",
                                    fmt::format("cuda: no GPU to profile ({})", why_not));
        }
      } else if (options.precision == std::string("bf16")) {
        throw schemas::InputError("--precision", "",
                                  "bf16: the CPU backend computes in fp32 (bf16 is --device "
                                  "cuda's)");
      }
    });
    InterruptWatch watch;
    profiler::ProfileSettings settings;
    settings.quick = options.quick;
    settings.repeats = options.quick ? 3 : 5;
    if (options.device == "cuda") {
      settings.device = executor::Device::cuda;
      settings.activation_type = options.precision == std::string("fp32")
                                     ? executor::ScalarType::float32
                                     : executor::ScalarType::bfloat16;
    }
    if (logs && isatty(STDERR_FILENO)) {
      settings.progress = [](const std::string& line) {
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
        std::fflush(stderr);
      };
    }
    settings.interrupted = [] { return interrupt_signal != 0; };
    const auto start = std::chrono::steady_clock::now();
    profiler::MachineProfile profile;
    try {
      profile = profiler::profile_machine(
          world, layout, settings, options.name.value_or("measured-" + profiler::host_name()),
          command_line);
    } catch (const profiler::ProfileInterrupted&) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string line = fmt::format(
          "strata: profile interrupted by signal {} after {:.1f} s: nothing was written to {}\n",
          static_cast<int>(interrupt_signal), seconds, options.out);
      if (settings.progress) std::fprintf(stderr, "\r\033[K");
      if (world.size() == 1 || logs) std::fputs(line.c_str(), stderr);
      if (world.size() > 1) world.abort(kExitInvalidInput);
      return kExitInvalidInput;
    }
    if (settings.progress) std::fprintf(stderr, "\r\033[K");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!logs) return 0;
    schemas::write_json_document(options.out, schemas::cluster_to_json(profile.cluster));
    const profiler::PresetComparison closest = profiler::compare_with_presets(profile.cluster);
    if (options.log_format == LogFormat::json) {
      print_json(profile, closest, options.out, seconds);
    } else {
      print_text(profile, closest, options.out, seconds);
    }
    return 0;
  } catch (const ReportedFailure& failure) {
    return failure.exit_code;
  } catch (...) {
    if (world.size() == 1) throw;
    const FailureReport report = failure_report(std::current_exception());
    std::fprintf(stderr, "strata: rank %d: %s\n", world.rank(), report.line.c_str());
    world.abort(report.exit_code);
  }
}

}  // namespace strata::tools
