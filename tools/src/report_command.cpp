// `strata report`: one self-contained HTML page about a plan — its predicted step per rank,
// memory per pipeline rank, where the time goes — beside other plans (the top-K of a plan set or
// of --compare files) and a training run's measured steps (--train-log). report_page.h draws it.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "commands.h"
#include "plan_set_prediction.h"
#include "report_page.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "train_log_reader.h"

namespace strata::tools {
namespace {

// A plan as read, before it is simulated.
struct LoadedPlan {
  std::string label;
  schemas::Plan plan;
  std::filesystem::path directory;  // resolves a custom schedule's CSV file
};

// Every plan of a file: a plan file's one (labelled by its file name), or a plan set's (by id).
std::vector<LoadedPlan> load_plans(const std::string& path) {
  const std::filesystem::path file(path);
  if (schemas::document_kind_of_file(file) == schemas::DocumentKind::plan_set) {
    const schemas::PlanSet set = schemas::load_plan_set_file(file);
    std::vector<LoadedPlan> plans;
    for (const schemas::PlanSetEntry& entry : set.plans) {
      plans.push_back({entry.id, entry.plan, file.parent_path()});
    }
    return plans;
  }
  return {{file.filename().string(), schemas::load_plan_file(file), file.parent_path()}};
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, ReportOptions& options) {
  CLI::App* command = app.add_subcommand(
      "report",
      "Write one HTML page about a plan: its predicted step per rank, memory per stage, where "
      "the time goes, beside other plans and a training run");
  command->add_option("--plan", options.plan, "Plan file, or plan set file (its plans compared)")
      ->required();
  command->add_option("--id", options.plan_id,
                      "With a plan set: the plan to show in full (default: its first)");
  command->add_option("--compare", options.compare,
                      "More plan files or plan sets, each compared with the plan");
  command->add_option("--train-log", options.train_log,
                      "What strata train printed running the plan (text or --log-format json): "
                      "each step measured beside predicted");
  command
      ->add_option("--mode", options.mode,
                   "The timeline's rows: symmetric, one per pipeline rank; full, every rank")
      ->check(CLI::IsMember({"symmetric", "full"}))
      ->capture_default_str();
  command->add_option("--out", options.out_path, "The HTML file to write")->required();
  return command;
}

int run_report(const ReportOptions& options) {
  // Everything is read and checked before anything is simulated or written: bad input leaves no
  // file behind.
  std::vector<LoadedPlan> plans = load_plans(options.plan);
  if (options.plan_id) {
    if (schemas::document_kind_of_file(options.plan) != schemas::DocumentKind::plan_set) {
      throw schemas::InputError(
          "--id", "", fmt::format("picks a plan of a plan set; {} is a plan file", options.plan));
    }
    const schemas::PlanSet set = schemas::load_plan_set_file(options.plan);
    const std::string& id = plan_of_set(set, *options.plan_id, options.plan, "--id").id;
    // The chosen plan first, the others after it in the set's order.
    std::stable_partition(plans.begin(), plans.end(),
                          [&id](const LoadedPlan& plan) { return plan.label == id; });
  }
  for (const std::string& path : options.compare) {
    for (LoadedPlan& plan : load_plans(path)) plans.push_back(std::move(plan));
  }
  Report report;
  if (options.train_log) {
    report.measured = read_train_log(*options.train_log);
    report.measured_source = std::filesystem::path(*options.train_log).filename().string();
  }
  const simulator::SimulationMode mode = options.mode == "full"
                                             ? simulator::SimulationMode::full
                                             : simulator::SimulationMode::symmetric;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    // Only the plan drawn in full needs its timeline.
    report.plans.push_back(simulate_for_report(std::move(plans[i].label), std::move(plans[i].plan),
                                               plans[i].directory, i == 0, mode));
  }
  write_report(options.out_path, report);
  std::cout << fmt::format(
      "wrote {} ({}{})\n", options.out_path.string(),
      report.plans.size() == 1 ? std::string("1 plan")
                               : fmt::format("{} plans compared", report.plans.size()),
      report.measured.empty() ? std::string()
                              : fmt::format(", {} measured steps", report.measured.size()));
  return 0;
}

}  // namespace strata::tools
