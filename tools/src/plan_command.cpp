// `strata plan`: searches every layout of a model on a cluster for a fixed global batch and
// prints the fastest plans that fit, why each is as fast as it is, and how the search went;
// `--out` writes them as plan files, `--emit megatron` as Megatron-LM flags. `--phases FILE`
// plans each phase of a run (planner/phase_planning.h) and `--strategies K` picks K diverse
// strategies (planner/strategy_choice.h); both write a plan set.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli_checks.h"
#include "commands.h"
#include "phased_plan_report.h"
#include "plan_request.h"
#include "precision_choice.h"
#include "report_page.h"
#include "strata/planner/megatron_arguments.h"
#include "strata/planner/phase_planning.h"
#include "strata/planner/plan_search.h"
#include "strata/planner/strategy_choice.h"
#include "strata/planner/switch_pricing.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "text_format.h"

namespace strata::tools {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// "E+9, 10×6, 9+L": stages with the embedding (E) and the LM head (L), equal neighbours grouped.
std::string split_text(const schemas::Plan& plan) {
  if (plan.mesh.vpp > 1) {
    return fmt::format("{}×{} chunks of {}", plan.mesh.pp, plan.mesh.vpp,
                       plan.stages.front().num_layers);
  }
  std::vector<std::string> parts;
  for (std::size_t s = 0; s < plan.stages.size();) {
    const schemas::PipelineStage& stage = plan.stages[s];
    if (stage.embedding || stage.lm_head) {
      std::string text = stage.embedding ? "E" : "";
      if (stage.num_layers > 0)
        text += (text.empty() ? "" : "+") + std::to_string(stage.num_layers);
      if (stage.lm_head) text += stage.num_layers > 0 || stage.embedding ? "+L" : "L";
      parts.push_back(text);
      ++s;
      continue;
    }
    std::size_t run = s;
    while (run < plan.stages.size() && !plan.stages[run].lm_head &&
           plan.stages[run].num_layers == stage.num_layers) {
      ++run;
    }
    parts.push_back(run - s > 1 ? fmt::format("{}×{}", stage.num_layers, run - s)
                                : std::to_string(stage.num_layers));
    s = run;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

nlohmann::json layout_json(const schemas::Plan& plan) {
  return {{"tp", plan.mesh.tp},
          {"cp", plan.mesh.cp},
          {"cp_comm", schemas::name_of(plan.cp_comm, schemas::kContextParallelCommNames)},
          {"pp", plan.mesh.pp},
          {"dp", plan.mesh.dp},
          {"vpp", plan.mesh.vpp},
          {"micro_batch_size", plan.batch.micro_batch_size},
          {"zero_stage", plan.zero_stage},
          {"dp_shard", plan.mesh.zero_shard_dp()},
          {"recompute", recompute_text(plan)},
          {"sequence_parallel", plan.sequence_parallel},
          {"schedule", schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames)},
          {"order", schemas::mesh_order_to_string(plan.mesh.order)},
          {"split", split_text(plan)},
          {"ep", plan.mesh.ep},
          {"etp", plan.mesh.etp},
          {"ep_comm_overlap", plan.ep_comm_overlap}};
}

// The table's columns, with the expert mesh after dp for a mixture of experts, and whether its
// all-to-alls run beside another micro-batch's compute ("overlap") or on the critical path.
struct Columns {
  std::vector<std::string> names;
  std::vector<bool> right_aligned;
};
Columns with_expert_columns(Columns columns, bool experts) {
  if (!experts) return columns;
  const auto dp = std::find(columns.names.begin(), columns.names.end(), "dp");
  const auto at = static_cast<std::ptrdiff_t>(dp - columns.names.begin()) + 1;
  columns.names.insert(columns.names.begin() + at, {"ep", "etp", "a2a"});
  columns.right_aligned.insert(columns.right_aligned.begin() + at, {true, true, false});
  return columns;
}
std::vector<std::string> with_expert_cells(std::vector<std::string> cells, std::size_t after,
                                           const schemas::Plan& plan) {
  if (!plan.model.moe) return cells;
  cells.insert(cells.begin() + static_cast<std::ptrdiff_t>(after) + 1,
               {std::to_string(plan.mesh.ep), std::to_string(plan.mesh.etp),
                plan.ep_comm_overlap               ? "overlap"
                : plan.mesh.ep * plan.mesh.etp > 1 ? "exposed"
                                                   : "-"});
  return cells;
}

std::filesystem::path numbered(const std::filesystem::path& path, std::size_t rank) {
  if (rank == 0) return path;
  std::filesystem::path result = path;
  result.replace_filename(
      fmt::format("{}.{}{}", path.stem().string(), rank + 1, path.extension().string()));
  return result;
}

void print_progress(std::size_t done, std::size_t total) {
  const int width = 30;
  const int filled = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\r[%s%s] %3d%% %zu/%zu candidates", std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(),
               total ? static_cast<int>(100 * done / total) : 100, done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// "73.1/75.3 GiB"; below a GiB the peak in MiB ("22.8 MiB/4.0 GiB"), so that small models'
// plans do not all read 0.0.
std::string memory_text(double peak_bytes, double capacity_bytes) {
  if (peak_bytes < kGiB) {
    return fmt::format("{:.1f} MiB/{:.1f} GiB", peak_bytes / (1024.0 * 1024.0),
                       capacity_bytes / kGiB);
  }
  return fmt::format("{:.1f}/{:.1f} GiB", peak_bytes / kGiB, capacity_bytes / kGiB);
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, PlanOptions& options) {
  CLI::App* command = app.add_subcommand(
      "plan", "Search every tp/cp/pp/dp layout, schedule and split; print the fastest that fit");
  command->add_option("--model", options.model, "Model preset, model file or HF config.json")
      ->capture_default_str();
  command
      ->add_option("--cluster", options.cluster,
                   "Cluster preset (NAME:NODES or NAME:NODESxGPUS) or file")
      ->capture_default_str();
  command->add_option("--global-batch", options.global_batch, "Sequences per optimizer step")
      ->check(whole_number_from(1, schemas::kMaxGlobalBatchSize))
      ->capture_default_str();
  command
      ->add_option("--seq-len", options.seq_length,
                   "Sequence length (default: the model's, at most 8192)")
      ->check(whole_number_from(1, schemas::kMaxSeqLength));
  command->add_option("--top", options.top_k, "How many plans to show")
      ->check(whole_number_from(1, kMaxTopPlans))
      ->capture_default_str();
  command->add_option("--out", options.out_path,
                      "Write the plans as plan files: FILE, then FILE's stem .2, .3, ...");
  command
      ->add_option("--memory-reserve", options.memory_reserve,
                   "Fraction of GPU memory to keep free beyond the cluster's reserve")
      ->check(number_from(0.0, kMaxMemoryReserve));
  command
      ->add_option("--max-tp", options.max_tp,
                   "Largest tensor-parallel size (default: 2 nodes' GPUs)")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize));
  command->add_option("--schedules", options.schedules, "Schedules to consider")
      ->delimiter(',')
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"}));
  command
      ->add_option("--precision", options.precision,
                   "Training dtype (default: bf16, or the best the cluster's GPU has)")
      ->check(CLI::IsMember(choices_of(schemas::kDtypeNames)));
  command
      ->add_option("--gradient-dtype", options.gradient_dtype,
                   "What gradients accumulate and reduce in (default: fp32, fp16 under fp16; "
                   "bf16 as Megatron's --grad-reduce-in-bf16, for --framework other than strata)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  command
      ->add_option("--framework", options.framework,
                   "Training stack the plans are for: its pipeline sends and gradient reduction "
                   "change the predictions")
      ->check(CLI::IsMember(choices_of(schemas::kTrainingFrameworkNames)))
      ->capture_default_str();
  command->add_option("--emit", options.emit, "Also print the best plan for: megatron")
      ->check(CLI::IsMember({"megatron"}));
  command->add_flag("--variants,--all-variants", options.all_variants,
                    "List every layout as a row of its own (by default each row is a distinct "
                    "mesh, shown by its fastest layout, with its other layouts counted)");
  command->add_flag("--quiet", options.quiet, "No progress bar");
  CLI::Option* phases =
      command->add_option("--phases", options.phases_path,
                          "Phases file (steps, global batch and sequence length of each): one "
                          "plan per phase, least predicted time with the switches; --out writes "
                          "a plan set");
  CLI::Option* strategies =
      command
          ->add_option("--strategies", options.strategies,
                       "K fast plans of different meshes for one phase, with the predicted "
                       "switch between each pair; --out writes a plan set")
          ->check(whole_number_from(1, kMaxStrategies));
  command->add_option("--report", options.report_path,
                      "Also write an HTML report: the first plan in full, the others compared "
                      "with it (strata report)");
  phases->excludes(strategies);
  for (const char* name : {"--global-batch", "--seq-len", "--emit", "--variants", "--report"}) {
    phases->excludes(command->get_option(name));
  }
  strategies->excludes(command->get_option("--variants"));
  add_format_option(command, options.format);
  return command;
}

namespace {

std::string seconds_or_dash(const std::optional<planner::SwitchPrediction>& prediction) {
  if (!prediction) return "-";
  return fmt::format("{} ({} out)", format_seconds(prediction->seconds),
                     format_bytes(static_cast<double>(prediction->most_sent_bytes)));
}

int run_phase_plan(const PlanOptions& options, const schemas::ModelConfig& model,
                   const schemas::ClusterConfig& cluster, const PlanRequest& request) {
  const std::string source = options.phases_path->string();
  const schemas::TrainingPhases phases = schemas::load_training_phases_file(*options.phases_path);
  std::function<void(std::size_t, std::size_t)> progress;
  if (!options.quiet && isatty(STDERR_FILENO)) {
    progress = [](std::size_t done, std::size_t total) {
      std::fprintf(stderr, "\rpricing switches: %zu/%zu pairs of candidates", done, total);
      if (done == total) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    };
  }
  std::string precision_note;
  const planner::PhasedPlan planned =
      planner::plan_phases(model, cluster, phases, source,
                           plan_search_options(request, model, cluster, precision_note), progress);
  if (options.out_path) {
    schemas::write_json_document(*options.out_path, schemas::plan_set_to_json(planned.set));
  }
  if (options.format == OutputFormat::json) {
    nlohmann::json report = phased_plan_report(model, cluster, phases, planned);
    // The command line also names each chosen layout in its table's terms.
    for (std::size_t p = 0; p < planned.phases.size(); ++p) {
      report["phases"][p]["layout"] = layout_json(planned.phases[p].chosen.plan);
    }
    std::cout << report.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{} on {} × {} ({}): {} phases, {} steps\n", model.name,
                           cluster.world_size(), cluster.gpu.name, cluster.name,
                           planned.phases.size(), group_thousands(phases.total_steps()));
  const Columns columns = with_expert_columns(
      {{"phase", "first step", "steps", "batch", "seq", "tp", "cp", "pp", "dp", "mb", "ZeRO",
        "recompute", "schedule", "step", "phase time", "switch in", "choice"},
       {false, true, true, true, true, true, true, true, true, true, true, false, false, true, true,
        true, false}},
      model.moe.has_value());
  TextTable table(columns.names, columns.right_aligned);
  for (const planner::PlannedPhase& phase : planned.phases) {
    const schemas::Plan& plan = phase.chosen.plan;
    table.add_row(with_expert_cells(
        {phase.phase.name, group_thousands(phase.first_step), group_thousands(phase.phase.steps),
         std::to_string(phase.phase.global_batch_size), std::to_string(phase.phase.seq_length),
         std::to_string(plan.mesh.tp), cp_text(plan), std::to_string(plan.mesh.pp),
         std::to_string(plan.mesh.dp), std::to_string(plan.batch.micro_batch_size), zero_text(plan),
         recompute_text(plan),
         std::string(schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames)),
         format_seconds(phase.chosen.metrics.step_time_s), format_seconds(phase.steps_seconds),
         seconds_or_dash(phase.switch_in),
         phase.candidate == 0 ? "fastest"
                              : fmt::format("#{} of {}", phase.candidate + 1, phase.candidates)},
        8, plan));
  }
  std::cout << table.render();
  std::cout << fmt::format(
      "predicted run: {} ({} of it switching layout); each phase's fastest plan would take {}\n",
      format_seconds(planned.total_seconds), format_seconds(planned.switch_seconds),
      format_seconds(planned.each_fastest_seconds));
  if (options.out_path) {
    std::cout << fmt::format("wrote plan set {} (strata train --plan-set runs its phases)\n",
                             options.out_path->string());
  }
  return 0;
}

// Each strategy's predicted transfer to each other, as a table of "from" rows.
std::string switch_matrix(const schemas::PlanSet& set) {
  std::vector<std::string> header{"from \\ to"};
  for (const schemas::PlanSetEntry& entry : set.plans) header.push_back(entry.id);
  TextTable table(header, std::vector<bool>(header.size(), true));
  for (const schemas::PlanSetEntry& from : set.plans) {
    std::vector<std::string> row{from.id};
    for (const schemas::PlanSetEntry& to : set.plans) {
      std::string cell = "-";
      for (const schemas::PlanSwitchCost& cost : set.switches) {
        if (cost.from == from.id && cost.to == to.id) cell = format_seconds(cost.seconds);
      }
      row.push_back(cell);
    }
    table.add_row(row);
  }
  return table.render();
}

// What a search weighed, as `plan --format json` reports it.
nlohmann::json search_statistics_json(const planner::SearchStatistics& stats) {
  return {{"candidates_enumerated", stats.enumerated},
          {"pruned_by_rules", stats.pruned_by_rules},
          {"pruned_by_executor", stats.pruned_by_executor},
          {"pruned_as_duplicates", stats.pruned_as_duplicates},
          {"pruned_by_model_state_memory", stats.pruned_by_model_states},
          {"pruned_by_activation_memory", stats.pruned_by_activations},
          {"estimated", stats.estimated},
          {"simulated", stats.simulated},
          {"over_memory_in_simulation", stats.over_memory_in_simulation},
          {"search_seconds", stats.seconds}};
}

// One search's answer, as `strata plan` prints it (phases aside).
struct PlanAnswer {
  const schemas::ModelConfig& model;
  const schemas::ClusterConfig& cluster;
  const planner::SearchOptions& search;
  const planner::SearchResult& result;
  const std::optional<schemas::PlanSet>& strategies;
  std::int64_t seq = 0;
  std::string precision_note;
};

void print_plan_json(const PlanOptions& options, const PlanAnswer& answer) {
  const schemas::ModelConfig& model = answer.model;
  const schemas::ClusterConfig& cluster = answer.cluster;
  const planner::SearchResult& result = answer.result;
  const std::optional<schemas::PlanSet>& strategies = answer.strategies;
  const std::int64_t seq = answer.seq;
  const nlohmann::json statistics = search_statistics_json(result.statistics);
  nlohmann::json plans = nlohmann::json::array();
  for (const planner::RankedPlan& ranked : result.best) {
    plans.push_back({{"layout", layout_json(ranked.plan)},
                     {"step_time_s", ranked.metrics.step_time_s},
                     {"tokens_per_s", ranked.metrics.tokens_per_s},
                     {"mfu", ranked.metrics.mfu},
                     {"peak_memory_bytes", planner::peak_memory_bytes(ranked)},
                     {"capacity_bytes", ranked.memory.front().capacity_bytes},
                     {"bottleneck", ranked.bottleneck},
                     {"variants", ranked.variants},
                     {"plan", schemas::plan_to_json(ranked.plan)}});
  }
  nlohmann::json nearest = nlohmann::json::array();
  for (const planner::NearMiss& miss : result.nearest) {
    nearest.push_back({{"layout", layout_json(miss.plan)},
                       {"peak_memory_bytes", miss.peak_bytes},
                       {"capacity_bytes", miss.capacity_bytes},
                       {"lacking_bytes", miss.peak_bytes - miss.capacity_bytes},
                       {"limited_by", miss.reason}});
  }
  nlohmann::json report = {{"model", model.name},
                           {"cluster", cluster.name},
                           {"gpus", cluster.world_size()},
                           {"global_batch_size", options.global_batch},
                           {"seq_length", seq},
                           {"plans", plans},
                           {"statistics", statistics}};
  if (!options.emit.empty() && !result.best.empty()) {
    try {
      report["megatron_arguments"] = planner::megatron_arguments(result.best.front().plan);
    } catch (const schemas::InputError& refusal) {
      report["megatron_refusal"] = refusal.what();
    }
  }
  if (strategies) report["plan_set"] = schemas::plan_set_to_json(*strategies);
  if (result.best.empty()) {
    report["binding_constraint"] = result.binding_constraint;
    report["nearest"] = nearest;
  }
  std::cout << report.dump(2) << "\n";
}

// The table of the ranked plans, or, when none fits, why and the nearest candidates.
void print_plan_rows(const PlanOptions& options, const PlanAnswer& answer) {
  const schemas::ModelConfig& model = answer.model;
  const planner::SearchResult& result = answer.result;
  if (!result.best.empty()) {
    const Columns columns = with_expert_columns(
        {{"#", "variants", "tp", "cp", "pp", "dp", "vpp", "mb", "ZeRO", "recompute", "sp",
          "schedule", "order", "split", "step", "tokens/s", "MFU", "memory", "bottleneck"},
         {true, true, true, true, true, true, true, true, true, false, false, false, false, false,
          true, true, true, true, false}},
        model.moe.has_value());
    TextTable table(columns.names, columns.right_aligned);
    for (std::size_t i = 0; i < result.best.size(); ++i) {
      const planner::RankedPlan& ranked = result.best[i];
      const schemas::Plan& plan = ranked.plan;
      table.add_row(with_expert_cells(
          {std::to_string(i + 1),
           ranked.variants > 0 ? fmt::format("+{}", ranked.variants) : std::string(),
           std::to_string(plan.mesh.tp), cp_text(plan), std::to_string(plan.mesh.pp),
           std::to_string(plan.mesh.dp), std::to_string(plan.mesh.vpp),
           std::to_string(plan.batch.micro_batch_size), zero_text(plan), recompute_text(plan),
           plan.sequence_parallel ? "on" : "off",
           std::string(schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames)),
           schemas::mesh_order_to_string(plan.mesh.order), split_text(plan),
           fmt::format("{:.3f} s", ranked.metrics.step_time_s),
           group_thousands(static_cast<std::int64_t>(ranked.metrics.tokens_per_s)),
           format_percent(ranked.metrics.mfu),
           memory_text(planner::peak_memory_bytes(ranked), ranked.memory.front().capacity_bytes),
           ranked.bottleneck},
          5, plan));
    }
    std::cout << table.render();
    if (!options.all_variants &&
        std::any_of(result.best.begin(), result.best.end(),
                    [](const planner::RankedPlan& ranked) { return ranked.variants > 0; })) {
      std::cout << "variants: other layouts of the row's mesh (vpp, micro-batch, ZeRO, "
                   "recomputation, schedule, order) that fit; each row shows its fastest "
                   "(--variants lists each)\n";
    }
  } else {
    std::cout << (result.executor_refuses_all ? "No plan runs: "
                                              : "No plan fits. Binding constraint: ")
              << result.binding_constraint << "\n";
    if (!result.nearest.empty()) {
      std::cout << "Nearest candidates:\n";
      const Columns columns = with_expert_columns(
          {{"tp", "cp", "pp", "dp", "vpp", "mb", "ZeRO", "recompute", "peak", "lacks",
            "limited by"},
           {true, true, true, true, true, true, true, false, true, true, false}},
          model.moe.has_value());
      TextTable table(columns.names, columns.right_aligned);
      for (const planner::NearMiss& miss : result.nearest) {
        const schemas::Plan& plan = miss.plan;
        table.add_row(with_expert_cells(
            {std::to_string(plan.mesh.tp), std::to_string(plan.mesh.cp),
             std::to_string(plan.mesh.pp), std::to_string(plan.mesh.dp),
             std::to_string(plan.mesh.vpp), std::to_string(plan.batch.micro_batch_size),
             zero_text(plan), recompute_text(plan), format_gib(miss.peak_bytes),
             format_gib(miss.peak_bytes - miss.capacity_bytes), miss.reason},
            3, plan));
      }
      std::cout << table.render();
    }
  }
}

void print_plan_text(const PlanOptions& options, const PlanAnswer& answer) {
  const schemas::ModelConfig& model = answer.model;
  const schemas::ClusterConfig& cluster = answer.cluster;
  const planner::SearchOptions& search = answer.search;
  const planner::SearchResult& result = answer.result;
  const planner::SearchStatistics& stats = result.statistics;
  const std::optional<schemas::PlanSet>& strategies = answer.strategies;
  const std::int64_t seq = answer.seq;
  const std::string& precision_note = answer.precision_note;
  std::cout << fmt::format("{} on {} × {} ({}), global batch {} × {} tokens, {}{}\n", model.name,
                           cluster.world_size(), cluster.gpu.name, cluster.name,
                           options.global_batch, seq,
                           schemas::name_of(search.precision, schemas::kDtypeNames),
                           search.framework == schemas::TrainingFramework::strata
                               ? ""
                               : fmt::format(", as {} runs it (simulation only: strata train "
                                             "runs plans for the strata framework)",
                                             options.framework));
  if (!precision_note.empty()) std::cout << precision_note << "\n";
  print_plan_rows(options, answer);
  std::cout << fmt::format(
      "search: {} candidates; pruned {} by layout rules, {}{} as duplicates, {} by model-state "
      "memory, {} by activation memory; {} estimated, {} simulated ({} over memory); {:.2f} s\n",
      group_thousands(stats.enumerated), group_thousands(stats.pruned_by_rules),
      stats.pruned_by_executor > 0
          ? fmt::format("{} the executor does not run, ", group_thousands(stats.pruned_by_executor))
          : std::string(),
      group_thousands(stats.pruned_as_duplicates), group_thousands(stats.pruned_by_model_states),
      group_thousands(stats.pruned_by_activations), group_thousands(stats.estimated),
      group_thousands(stats.simulated), group_thousands(stats.over_memory_in_simulation),
      stats.seconds);
  if (strategies) {
    std::cout << fmt::format("strategies {}; predicted switch between them:\n",
                             strategies->id_list())
              << switch_matrix(*strategies);
    if (options.out_path) {
      std::cout << fmt::format(
          "wrote plan set {} (strata train --plan-set it --switch STEP:ID moves between them)\n",
          options.out_path->string());
    }
  } else if (options.out_path && !result.best.empty()) {
    std::cout << fmt::format("wrote {} plan file{} starting with {}\n", result.best.size(),
                             result.best.size() == 1 ? "" : "s", options.out_path->string());
  }
  if (options.report_path && !result.best.empty()) {
    std::cout << fmt::format("wrote report {}\n", options.report_path->string());
  }
  if (!options.emit.empty() && !result.best.empty()) {
    try {
      const std::string flags = planner::megatron_arguments(result.best.front().plan);
      std::cout << "Megatron-LM flags for plan 1:\n" << flags;
    } catch (const schemas::InputError& refusal) {
      std::cout << "Megatron-LM cannot run plan 1 as written: " << refusal.what() << "\n";
    }
  }
}

}  // namespace

int run_plan(const PlanOptions& options) {
  const schemas::ModelConfig model = schemas::resolve_model(options.model);
  const schemas::ClusterConfig cluster = schemas::resolve_cluster(options.cluster);
  std::string precision_note;
  const PlanRequest request{.global_batch = options.global_batch,
                            .seq_length = options.seq_length,
                            .top_k = options.top_k,
                            .memory_reserve = options.memory_reserve,
                            .max_tp = options.max_tp,
                            .schedules = options.schedules,
                            .precision = options.precision,
                            .gradient_dtype = options.gradient_dtype,
                            .framework = options.framework,
                            .all_variants = options.all_variants};
  if (options.phases_path) return run_phase_plan(options, model, cluster, request);
  planner::SearchOptions search = plan_search_options(request, model, cluster, precision_note);
  // Strategies come from a deeper list: the fastest plans often share a mesh.
  if (options.strategies) search.top_k = strategy_search_depth(search.top_k, *options.strategies);
  const std::int64_t seq = search.seq_length > 0 ? search.seq_length : model.max_seq_length;
  if (!options.quiet && isatty(STDERR_FILENO)) {
    const auto started = std::chrono::steady_clock::now();
    search.progress = [started](std::size_t done, std::size_t total) {
      if (std::chrono::steady_clock::now() - started > std::chrono::seconds(1) || done == total) {
        if (done == total && std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
          return;
        }
        print_progress(done, total);
      }
    };
  }
  planner::SearchResult result = planner::search_plans(model, cluster, search);
  std::optional<schemas::PlanSet> strategies;
  if (options.strategies && !result.best.empty()) {
    result.best = planner::diverse_strategies(result.best, *options.strategies);
    strategies = planner::strategy_set(
        result.best, strategies_description(model, cluster, search, result.best.size()));
  }

  if (strategies && options.out_path) {
    schemas::write_json_document(*options.out_path, schemas::plan_set_to_json(*strategies));
  } else if (options.out_path) {
    for (std::size_t i = 0; i < result.best.size(); ++i) {
      schemas::write_json_document(numbered(*options.out_path, i),
                                   schemas::plan_to_json(result.best[i].plan));
    }
  }
  if (options.report_path && !result.best.empty()) {
    Report report;
    for (std::size_t i = 0; i < result.best.size(); ++i) {
      // The planner's plans name no custom schedule file: no directory to resolve one in.
      report.plans.push_back(simulate_for_report(fmt::format("#{}", i + 1), result.best[i].plan, {},
                                                 i == 0, simulator::SimulationMode::symmetric));
    }
    write_report(*options.report_path, report);
  }
  const PlanAnswer answer{model, cluster, search, result, strategies, seq, precision_note};
  if (options.format == OutputFormat::json) {
    print_plan_json(options, answer);
  } else {
    print_plan_text(options, answer);
  }
  if (result.best.empty()) {
    std::fprintf(stderr, "strata: no plan %s: %s\n", result.executor_refuses_all ? "runs" : "fits",
                 result.binding_constraint.c_str());
    return 1;
  }
  return 0;
}

}  // namespace strata::tools
