// `strata`: plans, simulates and runs parallel LLM training. This file wires the subcommands
// together and maps failures to exit codes: 0 ok, 1 invalid input, 2 usage.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>

#include "build_info.h"
#include "commands.h"
#include "strata/executor/cuda/cuda_device.h"
#include "strata/schemas/input_error.h"

namespace {

constexpr int kExitInvalidInput = 1;
constexpr int kExitUsage = 2;

std::string version_text() {
  return fmt::format("strata {} (CUDA toolkit: {})", strata::tools::kVersion,
                     strata::tools::kHaveCuda ? fmt::format("{} found", strata::tools::kCudaToolkit)
                                              : std::string("not found, CPU build"));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace strata::tools;
  CLI::App app{
      "Strata: decides how to split an LLM across a GPU cluster, predicts how fast it "
      "trains, and trains it that way.",
      "strata"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);

  PresetsOptions presets;
  ValidateOptions validate;
  DescribeOptions describe;
  ScheduleOptions schedule;
  CLI::App* presets_command = add_presets_command(app, presets);
  CLI::App* validate_command = add_validate_command(app, validate);
  CLI::App* describe_command = add_describe_command(app, describe);
  CLI::App* schedule_command = add_schedule_command(app, schedule);
  SimulateOptions simulate;
  ValidateSimOptions validate_sim;
  CLI::App* simulate_command = add_simulate_command(app, simulate);
  CLI::App* validate_sim_command = add_validate_sim_command(app, validate_sim);
  PlanOptions plan;
  CLI::App* plan_command = add_plan_command(app, plan);
  DataOptions data;
  CLI::App* data_command = add_data_command(app, data);
  TrainOptions train;
  CLI::App* train_command = add_train_command(app, train);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "strata: %s (see strata --help)\n", error.what());
    return kExitUsage;
  }

  try {
    if (presets_command->parsed()) return run_presets(presets);
    if (validate_command->parsed()) return run_validate(validate);
    if (describe_command->parsed()) return run_describe(describe);
    if (schedule_command->parsed()) return run_schedule(schedule);
    if (simulate_command->parsed()) return run_simulate(simulate);
    if (validate_sim_command->parsed()) return run_validate_sim(validate_sim);
    if (plan_command->parsed()) return run_plan(plan);
    if (data_command->parsed()) return run_data(data);
    if (train_command->parsed()) return run_train(train);
  } catch (const strata::schemas::InputError& error) {
    std::fprintf(stderr, "strata: %s\n", error.what());
    return kExitInvalidInput;
  } catch (const strata::executor::DeviceError& error) {
    std::fprintf(stderr, "strata: %s\n", error.what());
    return kExitInvalidInput;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "strata: out of memory\n");
    return kExitInvalidInput;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "strata: internal error: %s\n", error.what());
    return 3;
  }
  return kExitUsage;
}
