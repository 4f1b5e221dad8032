// `strata validate FILE...`: checks model, cluster, plan and Hugging Face config files, telling
// each file's kind; every invalid file gets its one-line reason on stderr and exit status 1.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "commands.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schedule/plan_schedule.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "text_format.h"

namespace strata::tools {
namespace {

std::string summarize(const schemas::LoadedDocument& document) {
  using schemas::DocumentKind;
  switch (document.kind) {
    case DocumentKind::model:
    case DocumentKind::hf_config: {
      const auto& model = std::get<schemas::ModelConfig>(document.content);
      return fmt::format(
          "{}{} ({}), {} parameters",
          document.kind == DocumentKind::hf_config ? "Hugging Face config of " : "model ",
          model.name, schemas::name_of(model.architecture, schemas::kArchitectureNames),
          group_thousands(costmodels::count_parameters(model).total()));
    }
    case DocumentKind::cluster: {
      const auto& cluster = std::get<schemas::ClusterConfig>(document.content);
      return fmt::format("cluster {}, {} node{} x {} {}", cluster.name, cluster.nodes,
                         cluster.nodes == 1 ? "" : "s", cluster.gpus_per_node, cluster.gpu.name);
    }
    case DocumentKind::plan: {
      const auto& plan = std::get<schemas::Plan>(document.content);
      const std::string experts =
          plan.model.moe ? fmt::format(" ep={} etp={}", plan.mesh.ep, plan.mesh.etp) : "";
      return fmt::format("plan for {} on {} GPUs of {}: tp={} cp={} dp={} pp={} vpp={}{}, {}",
                         plan.model.name, plan.cluster.world_size(), plan.cluster.name,
                         plan.mesh.tp, plan.mesh.cp, plan.mesh.dp, plan.mesh.pp, plan.mesh.vpp,
                         experts,
                         schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames));
    }
    case DocumentKind::plan_set: {
      const auto& set = std::get<schemas::PlanSet>(document.content);
      const std::string ids = set.id_list();
      return fmt::format("plan set for {} on {} ranks: {} plan{} ({}), {} phase{}",
                         set.plans.front().plan.model.name,
                         set.plans.front().plan.mesh.world_size(), set.plans.size(),
                         set.plans.size() == 1 ? "" : "s", ids, set.phases.size(),
                         set.phases.size() == 1 ? "" : "s");
    }
    case DocumentKind::phases: {
      const auto& phases = std::get<schemas::TrainingPhases>(document.content);
      std::string each;
      for (const schemas::TrainingPhase& phase : phases.phases) {
        each += fmt::format("{}{} {} steps of {} × {}", each.empty() ? "" : ", ", phase.name,
                            phase.steps, phase.global_batch_size, phase.seq_length);
      }
      return fmt::format("{} phase{}, {} steps: {}", phases.phases.size(),
                         phases.phases.size() == 1 ? "" : "s", phases.total_steps(), each);
    }
  }
  return "";
}

std::string_view kind_name(schemas::DocumentKind kind) {
  return kind == schemas::DocumentKind::hf_config
             ? "hf_config"
             : schemas::name_of(kind, schemas::kStrataDocumentKindNames);
}

}  // namespace

CLI::App* add_validate_command(CLI::App& app, ValidateOptions& options) {
  CLI::App* command = app.add_subcommand(
      "validate",
      "Check model, cluster, plan, plan set, phases and Hugging Face config.json files (kind "
      "detected)");
  command->add_option("files", options.files, "Files to check")->required();
  add_format_option(command, options.format);
  return command;
}

int run_validate(const ValidateOptions& options) {
  nlohmann::json report = nlohmann::json::array();
  bool all_valid = true;
  for (const std::string& file : options.files) {
    try {
      const schemas::LoadedDocument document = schemas::load_document_file(file);
      if (document.kind == schemas::DocumentKind::plan) {
        // What `strata schedule` and `strata simulate` would check too: a custom schedule's CSV
        // is read and run to the end (complete, on the right ranks, no deadlock). Generated
        // schedules are correct by construction.
        const auto& plan = std::get<schemas::Plan>(document.content);
        if (plan.schedule.type == schemas::ScheduleType::custom) {
          schedule::build_plan_schedule(plan, std::filesystem::path(file).parent_path());
        }
      }
      report.push_back({{"file", file},
                        {"valid", true},
                        {"kind", kind_name(document.kind)},
                        {"summary", summarize(document)}});
      if (options.format == OutputFormat::table) {
        std::cout << fmt::format("{}: ok: {}\n", file, summarize(document));
      }
    } catch (const schemas::InputError& error) {
      all_valid = false;
      report.push_back({{"file", file}, {"valid", false}, {"error", error.what()}});
      std::fprintf(stderr, "strata: %s\n", error_line(error.what()).c_str());
    }
  }
  if (options.format == OutputFormat::json) std::cout << report.dump(2) << "\n";
  return all_valid ? 0 : 1;
}

}  // namespace strata::tools
