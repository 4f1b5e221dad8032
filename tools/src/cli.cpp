// The `strata` command line: wires the subcommands together and maps failures to exit codes —
// 0 ok, 1 invalid input (one `strata:` line on stderr), 2 usage, 3 an internal error.
#include "cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string_view>
#include <vector>

#include "build_info.h"
#include "cli_checks.h"
#include "commands.h"
#include "failure_report.h"
#include "strata/executor/distributed/communicator.h"
#include "strata/schemas/closest_name.h"
#include "strata/schemas/input_error.h"

namespace {

std::string version_text() {
  return fmt::format("strata {} (CUDA toolkit: {})", strata::tools::kVersion,
                     strata::tools::kHaveCuda ? fmt::format("{} found", strata::tools::kCudaToolkit)
                                              : std::string("not found, CPU build"));
}

}  // namespace

namespace strata::tools {

int run_cli(int argc, char** argv) {
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
  ReshardOptions reshard;
  CLI::App* reshard_command = add_reshard_command(app, reshard);
  SampleOptions sample;
  CLI::App* sample_command = add_sample_command(app, sample);
  ProfileOptions profile;
  CLI::App* profile_command = add_profile_command(app, profile);
  ReportOptions report;
  CLI::App* report_command = add_report_command(app, report);

  // CLI11 reports `strata plna` as "A subcommand is required": name the word and the nearest one.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string_view> names;
    for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
    const std::string word = argv[1];
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      const auto suggestion = schemas::closest_name(word, names);
      if (executor::launch_rank() != 0) return kExitUsage;
      std::fprintf(stderr, "strata: unknown subcommand \"%s\"%s (see strata --help)\n",
                   shorten_value(word).c_str(),
                   suggestion ? fmt::format("; did you mean \"{}\"?", *suggestion).c_str() : "");
      return kExitUsage;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    // Under mpirun every rank parses the same words: the first says what is wrong.
    if (executor::launch_rank() == 0) {
      std::fprintf(stderr, "strata: %s (see strata --help)\n", error_line(error.what()).c_str());
    }
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
    if (reshard_command->parsed()) return run_reshard(reshard);
    if (sample_command->parsed()) return run_sample(sample);
    if (report_command->parsed()) return run_report(report);
    if (profile_command->parsed()) {
      std::string command_line = "strata";
      for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
      return run_profile(profile, command_line);
    }
  } catch (...) {
    const FailureReport report = failure_report(std::current_exception());
    std::fprintf(stderr, "strata: %s\n", report.line.c_str());
    return report.exit_code;
  }
  return kExitUsage;
}

}  // namespace strata::tools
