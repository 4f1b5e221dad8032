// `strata validate-sim FILE.jsonl`: simulates each published run of a file in the format of
// shared/validation/README.md and sets the prediction beside the measured iteration time, then
// the mean, median and worst absolute error over the complete rows.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "strata/schemas/document_loader.h"
#include "strata/simulator/plan_simulation.h"
#include "strata/simulator/published_run.h"
#include "text_format.h"

namespace strata::tools {

CLI::App* add_validate_sim_command(CLI::App& app, ValidateSimOptions& options) {
  CLI::App* command = app.add_subcommand(
      "validate-sim", "Compare simulated step times with published, measured training runs");
  command->add_option("runs", options.runs_path, "JSON-lines file of published runs")->required();
  command->add_option("--write-plans", options.plans_directory,
                      "Also write each complete row's plan to DIR/<id>.json, for strata simulate");
  add_format_option(command, options.format);
  return command;
}

int run_validate_sim(const ValidateSimOptions& options) {
  const std::vector<simulator::PublishedRun> runs =
      simulator::read_published_runs(options.runs_path);
  TextTable table({"run", "GPUs", "tp", "pp", "dp", "measured", "predicted", "error", "MFU"},
                  {false, true, true, true, true, true, true, true, true});
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> errors;
  for (const simulator::PublishedRun& run : runs) {
    if (!run.plan || !run.measured_step_time_s) {
      table.add_row({run.id, "", "", "", "", "", "", "incomplete", ""});
      rows.push_back({{"id", run.id}, {"complete", false}});
      continue;
    }
    const schemas::Plan& plan = *run.plan;
    if (options.plans_directory) {
      schemas::write_json_document(
          std::filesystem::path(*options.plans_directory) / (run.id + ".json"),
          schemas::plan_to_json(plan));
    }
    const simulator::PlanSimulation simulation = simulator::simulate_plan(plan, {});
    const double predicted = simulation.metrics.step_time_s;
    const double measured = *run.measured_step_time_s;
    const double error = (predicted - measured) / measured;
    errors.push_back(std::abs(error));
    table.add_row({run.id, std::to_string(plan.mesh.world_size()), std::to_string(plan.mesh.tp),
                   std::to_string(plan.mesh.pp), std::to_string(plan.mesh.dp),
                   fmt::format("{:.2f} s", measured), fmt::format("{:.2f} s", predicted),
                   fmt::format("{:+.1f}%", 100 * error), format_percent(simulation.metrics.mfu)});
    rows.push_back({{"id", run.id},
                    {"complete", true},
                    {"measured_step_time_s", measured},
                    {"predicted_step_time_s", predicted},
                    {"error", error},
                    {"mfu", simulation.metrics.mfu},
                    {"bubble_fraction", simulation.metrics.bubble_fraction},
                    {"breakdown", simulator::simulation_to_json(plan, simulation)["breakdown"]}});
  }
  nlohmann::json summary = {{"complete_rows", errors.size()}};
  std::string summary_text = "no complete rows\n";
  if (!errors.empty()) {
    std::vector<double> sorted = errors;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    const double mean = [&] {
      double total = 0;
      for (double e : sorted) total += e;
      return total / static_cast<double>(n);
    }();
    const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    const double worst = sorted.back();
    summary["mean_abs_error"] = mean;
    summary["median_abs_error"] = median;
    summary["worst_abs_error"] = worst;
    summary_text =
        fmt::format("{} complete rows: mean |error| {:.1f}%, median {:.1f}%, worst {:.1f}%\n", n,
                    100 * mean, 100 * median, 100 * worst);
  }
  if (options.format == OutputFormat::json) {
    std::cout << nlohmann::json{{"runs", rows}, {"summary", summary}}.dump(2) << "\n";
  } else {
    std::cout << table.render() << summary_text;
  }
  return 0;
}

}  // namespace strata::tools
