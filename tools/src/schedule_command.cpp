// `strata schedule --plan P [--rank R]`: the per-rank action lists a plan runs — what the
// simulator predicts and the executor executes — with each rank's peak in-flight micro-batches.
// A plan set lists each of its plans (or the one --id names).
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "commands.h"
#include "plan_set_prediction.h"
#include "strata/schedule/plan_schedule.h"
#include "strata/schedule/schedule_check.h"
#include "strata/schedule/schedule_csv.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::tools {
namespace {

constexpr std::int64_t kMaxListedActions = std::int64_t{1} << 22;

}  // namespace

CLI::App* add_schedule_command(CLI::App& app, ScheduleOptions& options) {
  CLI::App* command = app.add_subcommand(
      "schedule",
      "Print the per-rank pipeline action lists of a plan (what simulator and executor run)");
  command->add_option("--plan", options.plan, "Plan file, or plan set file (each of its plans)")
      ->required();
  command->add_option("--id", options.plan_id, "With a plan set: only its plan ID");
  command->add_option("--rank", options.rank, "Only this pipeline rank")
      ->check(whole_number_from(0, schemas::kMaxMeshAxisSize - 1));
  command->add_option(
      "--write-csv", options.csv_path,
      "Also write the lists as a custom-schedule CSV file (a starting point to edit)");
  add_format_option(command, options.format);
  return command;
}

namespace {

// One plan's lists: as JSON and as text (the rank's header and actions per line).
struct ListedSchedule {
  schedule::PipelineSchedule pipeline;
  nlohmann::json json;
  std::string text;
};

ListedSchedule list_schedule(const schemas::Plan& plan, const std::string& source,
                             const std::filesystem::path& plan_directory,
                             const ScheduleOptions& options) {
  // Every rank lists a forward and a backward per micro-batch and model chunk.
  const std::int64_t actions = 2 * plan.batch.num_micro_batches * plan.mesh.vpp * plan.mesh.pp;
  if (plan.schedule.type != schemas::ScheduleType::custom && actions > kMaxListedActions) {
    throw schemas::InputError(
        source, "/batch/num_micro_batches",
        fmt::format("{} micro-batches make about {} actions to list; strata schedule lists at most "
                    "{} (strata simulate predicts such a step without listing it)",
                    plan.batch.num_micro_batches, actions, kMaxListedActions));
  }
  const schedule::PipelineSchedule pipeline = schedule::build_plan_schedule(plan, plan_directory);
  const schedule::ScheduleStats stats = schedule::check_schedule(pipeline, source);
  if (options.rank && *options.rank >= pipeline.pp) {
    throw schemas::InputError(
        "--rank", "",
        fmt::format("{} is not a pipeline rank; {} has pp={}", *options.rank, source, pipeline.pp));
  }
  nlohmann::json ranks = nlohmann::json::array();
  std::string table = fmt::format("{} schedule: pp={} vpp={} micro-batches={}\n",
                                  schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames),
                                  pipeline.pp, pipeline.vpp, pipeline.num_micro_batches);
  for (int rank = 0; rank < pipeline.pp; ++rank) {
    if (options.rank && *options.rank != rank) continue;
    std::vector<int> stages;
    for (int stage = rank; stage < pipeline.num_stages(); stage += pipeline.pp)
      stages.push_back(stage);
    std::vector<std::string> listed;
    for (const schedule::Action& action : pipeline.ranks[rank])
      listed.push_back(schedule::to_string(action));
    ranks.push_back({{"rank", rank},
                     {"stages", stages},
                     {"peak_in_flight_micro_batches", stats.peak_in_flight[rank]},
                     {"actions", listed}});
    table +=
        fmt::format("rank {} (stages {}; peak in flight {}):\n  {}\n", rank,
                    fmt::join(stages, ", "), stats.peak_in_flight[rank], fmt::join(listed, " "));
  }
  return {pipeline,
          {{"schedule", schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames)},
           {"pp", pipeline.pp},
           {"vpp", pipeline.vpp},
           {"num_micro_batches", pipeline.num_micro_batches},
           {"ranks", ranks}},
          table};
}

}  // namespace

int run_schedule(const ScheduleOptions& options) {
  const std::filesystem::path plan_directory = std::filesystem::path(options.plan).parent_path();
  if (schemas::document_kind_of_file(options.plan) == schemas::DocumentKind::plan_set) {
    const schemas::PlanSet set = schemas::load_plan_set_file(options.plan);
    std::vector<const schemas::PlanSetEntry*> listed;
    if (options.plan_id) {
      listed.push_back(&plan_of_set(set, *options.plan_id, options.plan, "--id"));
    } else {
      for (const schemas::PlanSetEntry& entry : set.plans) listed.push_back(&entry);
    }
    if (options.csv_path && listed.size() > 1) {
      throw schemas::InputError(
          "--write-csv", "",
          fmt::format("{} holds {} plans: name one with --id", options.plan, listed.size()));
    }
    nlohmann::json plans = nlohmann::json::array();
    std::string text;
    for (const schemas::PlanSetEntry* entry : listed) {
      const std::string source = options.plan + "#" + entry->id;
      ListedSchedule schedule = list_schedule(entry->plan, source, plan_directory, options);
      if (options.csv_path) {
        schemas::write_file_atomically(*options.csv_path,
                                       schedule::schedule_to_csv(schedule.pipeline));
      }
      schedule.json["id"] = entry->id;
      plans.push_back(std::move(schedule.json));
      text += fmt::format("plan {}: {}", entry->id, schedule.text);
    }
    if (options.format == OutputFormat::json) {
      std::cout << nlohmann::json{{"plans", plans}}.dump(2) << "\n";
    } else {
      std::cout << text;
    }
    return 0;
  }
  if (options.plan_id) {
    throw schemas::InputError(
        "--id", "", fmt::format("picks a plan of a plan set; {} is a plan file", options.plan));
  }
  const schemas::Plan plan = schemas::load_plan_file(options.plan);
  const ListedSchedule schedule = list_schedule(plan, options.plan, plan_directory, options);
  if (options.csv_path) {
    schemas::write_file_atomically(*options.csv_path, schedule::schedule_to_csv(schedule.pipeline));
  }
  if (options.format == OutputFormat::json) {
    std::cout << schedule.json.dump(2) << "\n";
  } else {
    std::cout << schedule.text;
  }
  return 0;
}

}  // namespace strata::tools
