// `strata simulate`: predicts one training step of a plan — from a plan file or from the knobs
// on the command line — and says where the time and the memory go; `--trace` writes the
// simulated timeline for Perfetto.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>

#include "cli_checks.h"
#include "commands.h"
#include "plan_set_prediction.h"
#include "precision_choice.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/moe_config.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "strata/simulator/chrome_trace.h"
#include "strata/simulator/plan_simulation.h"
#include "text_format.h"

namespace strata::tools {
namespace {

constexpr const char* kCommandLine = "command line";

template <typename Enum, std::size_t N>
Enum parse_choice(const std::string& name, const std::array<schemas::EnumName<Enum>, N>& names) {
  // CLI11 has checked membership already.
  return *schemas::value_of(name, names);
}

// The cluster the knobs need: a preset named without ":NODES" is sized to tp·cp·dp·pp GPUs (part
// of one node when they are fewer than a node has).
schemas::ClusterConfig knobs_cluster(const SimulateOptions& options) {
  const std::string spec = *options.cluster;
  const std::int64_t model_parallel = options.tp * options.cp * options.pp;
  if (schemas::is_cluster_preset_spec(spec) && spec.find(':') == std::string::npos && options.dp) {
    const schemas::ClusterConfig node = schemas::cluster_preset(spec);
    const std::int64_t gpus = model_parallel * *options.dp;
    if (gpus < node.gpus_per_node)
      return schemas::cluster_preset(fmt::format("{}:1x{}", spec, gpus));
    if (gpus % node.gpus_per_node != 0) {
      throw schemas::InputError(
          "--dp", "",
          fmt::format("tp·cp·pp·dp = {} GPUs is not a whole number of {}-GPU {} nodes", gpus,
                      node.gpus_per_node, spec));
    }
    return schemas::cluster_preset(fmt::format("{}:{}", spec, gpus / node.gpus_per_node));
  }
  return schemas::resolve_cluster(spec);
}

// `precision_note` says why the precision is not bf16 when it was not asked for.
schemas::Plan plan_from_knobs(const SimulateOptions& options, std::string& precision_note) {
  if (!options.model || !options.cluster || !options.global_batch) {
    throw schemas::InputError(kCommandLine, "",
                              "give --plan, or --model, --cluster and --global-batch");
  }
  const schemas::ModelConfig model = schemas::resolve_model(*options.model);
  const schemas::ClusterConfig cluster = knobs_cluster(options);
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = options.tp;
  knobs.mesh.pp = options.pp;
  knobs.mesh.cp = options.cp;
  knobs.mesh.vpp = options.vpp;
  const std::int64_t model_parallel = options.tp * options.cp * options.pp;
  if (!options.dp && cluster.world_size() % model_parallel != 0) {
    throw schemas::InputError("--tp", "",
                              fmt::format("tp·cp·pp = {} does not divide the cluster's {} GPUs",
                                          model_parallel, cluster.world_size()));
  }
  knobs.mesh.dp = options.dp ? *options.dp : cluster.world_size() / model_parallel;
  knobs.seq_length = options.seq_length.value_or(0);
  knobs.micro_batch_size = options.micro_batch;
  knobs.global_batch_size = *options.global_batch;
  knobs.sequence_parallel = options.sequence_parallel;
  knobs.zero_stage = options.zero_stage;
  knobs.mesh.dp_shard = options.dp_shard.value_or(0);
  knobs.mesh.ep = options.ep;
  knobs.mesh.etp = options.etp;
  knobs.ep_comm_overlap = options.ep_comm_overlap;
  knobs.expert_load_imbalance = options.expert_load_imbalance;
  knobs.overlap_grad_reduce = !options.no_overlap_grad_reduce;
  knobs.gradient_bucket_elements = options.bucket_size;
  knobs.tp_comm_overlap = options.tp_comm_overlap;
  knobs.framework = parse_choice(options.framework, schemas::kTrainingFrameworkNames);
  knobs.attention = parse_choice(options.attention, schemas::kAttentionKernelNames);
  knobs.cp_comm = parse_choice(options.cp_comm, schemas::kContextParallelCommNames);
  knobs.recompute = parse_choice(options.recompute, schemas::kRecomputeGranularityNames);
  for (const std::string& module : options.recompute_modules) {
    knobs.recompute_modules.push_back(parse_choice(module, schemas::kRecomputeModuleNames));
  }
  for (const std::string& scope : options.cuda_graph_scope) {
    knobs.cuda_graph_scope.push_back(parse_choice(scope, schemas::kCudaGraphScopeNames));
  }
  knobs.schedule = parse_choice(options.schedule, schemas::kScheduleTypeNames);
  const PrecisionChoice precision = training_precision(options.precision, cluster);
  knobs.precision = precision.dtype;
  knobs.gradient_dtype = gradient_dtype_named(options.gradient_dtype, precision.dtype);
  precision_note = precision.note;
  return schemas::build_plan(model, cluster, knobs, kCommandLine);
}

std::string render_table(const schemas::Plan& plan, const simulator::PlanSimulation& simulation) {
  const simulator::StepMetrics& metrics = simulation.metrics;
  const schemas::Mesh& mesh = plan.mesh;
  std::string out = fmt::format(
      "{} on {} × {} ({}): tp={} cp={}{} dp={} pp={} vpp={}{}, {}, micro-batch {} × {}, seq {}, "
      "recompute {}, sequence parallel {}{}, ZeRO {}{}, {}{}{}{}\n",
      plan.model.name, mesh.world_size(), plan.cluster.gpu.name, plan.cluster.name, mesh.tp,
      mesh.cp, plan.cp_comm == schemas::ContextParallelComm::all_gather ? " (all-gather)" : "",
      mesh.dp, mesh.pp, mesh.vpp,
      plan.model.moe ? fmt::format(" ep={} etp={} edp={}{}", mesh.ep, mesh.etp, mesh.expert_dp(),
                                   plan.ep_comm_overlap ? " (all-to-all overlapped)" : "")
                     : "",
      schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames),
      plan.batch.micro_batch_size, plan.batch.num_micro_batches, plan.batch.seq_length,
      recompute_text(plan), plan.sequence_parallel ? "on" : "off",
      plan.tp_comm_overlap ? " with tp communication overlapped" : "", zero_text(plan),
      plan.overlap_grad_reduce ? "" : ", gradients reduced after the backward",
      schemas::name_of(plan.precision, schemas::kDtypeNames),
      schemas::gradient_dtype_of(plan) == schemas::default_gradient_dtype(plan.precision)
          ? ""
          : fmt::format(" with {} gradients",
                        schemas::name_of(schemas::gradient_dtype_of(plan), schemas::kDtypeNames)),
      plan.attention == schemas::AttentionKernel::unfused ? ", unfused attention" : "",
      plan.framework == schemas::TrainingFramework::strata
          ? ""
          : fmt::format(", as {} runs it (simulation only)",
                        schemas::name_of(plan.framework, schemas::kTrainingFrameworkNames)));
  out += fmt::format("  step time             {}\n", format_seconds(metrics.step_time_s));
  out += fmt::format("  tokens/s              {}\n",
                     group_thousands(static_cast<std::int64_t>(metrics.tokens_per_s)));
  out += fmt::format("  model TFLOP/s/GPU     {:.1f} (MFU {})\n", metrics.model_tflops_per_gpu,
                     format_percent(metrics.mfu));
  out += fmt::format("  hardware TFLOP/s/GPU  {:.1f} (with recomputation)\n",
                     metrics.hardware_tflops_per_gpu);
  out += fmt::format("  pipeline bubble       {}\n", format_percent(metrics.bubble_fraction));
  if (plan.mesh.dp * plan.mesh.cp > 1) {
    out += fmt::format(
        "  gradient buckets      {} per pipeline rank, at {} parameters a bucket\n",
        fmt::join(simulator::gradient_buckets_per_pipeline_rank(plan, simulation), ", "),
        layout::gradient_bucket_elements(plan));
  }
  out += "time per step (mean over pipeline ranks):\n";
  const simulator::TimeBreakdown& time = metrics.breakdown;
  TextTable breakdown({"part", "time", "share"}, {false, true, true});
  const std::pair<const char*, double> parts[] = {
      {"compute", time.compute_s},          {"recompute", time.recompute_s},
      {"tp communication", time.tp_comm_s}, {"cp communication", time.cp_comm_s},
      {"pp communication", time.pp_comm_s}, {"dp communication", time.dp_comm_s},
      {"optimizer", time.optimizer_s},      {"pipeline bubble", time.bubble_s}};
  for (const auto& [name, value] : parts) {
    breakdown.add_row({name, format_seconds(value), format_percent(value / metrics.step_time_s)});
    if (std::string_view(name) == "cp communication" && plan.model.moe) {
      breakdown.add_row({"ep communication", format_seconds(time.ep_comm_s),
                         format_percent(time.ep_comm_s / metrics.step_time_s)});
    }
    // Only stacks that issue kernels eagerly wait for their host (layer_costs.h).
    if (std::string_view(name) == "cp communication" && time.host_issue_s > 0) {
      breakdown.add_row({"waiting for the host", format_seconds(time.host_issue_s),
                         format_percent(time.host_issue_s / metrics.step_time_s)});
    }
  }
  out += breakdown.render();
  out += "memory per pipeline rank (peak):\n";
  // The communicator's temporaries get a column where the cluster measured any (MPI, not NCCL).
  const bool communicator =
      std::any_of(simulation.result.memory.begin(), simulation.result.memory.end(),
                  [](const simulator::RankMemory& m) { return m.communicator_bytes > 0; });
  std::vector<std::string> columns{"rank", "weights", "gradients", "optimizer", "activations"};
  if (communicator) columns.push_back("communicator");
  columns.insert(columns.end(), {"peak", "capacity", "fits"});
  std::vector<bool> right_aligned(columns.size(), true);
  right_aligned.back() = false;
  TextTable memory(columns, right_aligned);
  for (std::size_t rank = 0; rank < simulation.result.memory.size(); ++rank) {
    const simulator::RankMemory& m = simulation.result.memory[rank];
    std::vector<std::string> row{std::to_string(rank), format_gib(m.weights_bytes),
                                 format_gib(m.gradients_bytes), format_gib(m.optimizer_bytes),
                                 format_gib(m.activations_peak_bytes)};
    if (communicator) row.push_back(format_gib(m.communicator_bytes));
    row.insert(row.end(),
               {format_gib(m.peak_bytes), format_gib(m.capacity_bytes), m.fits() ? "yes" : "NO"});
    memory.add_row(row);
  }
  out += memory.render();
  return out;
}

}  // namespace

CLI::App* add_simulate_command(CLI::App& app, SimulateOptions& options) {
  CLI::App* command = app.add_subcommand(
      "simulate", "Predict one training step of a plan: time, throughput, MFU, memory per stage");
  CLI::Option* plan =
      command->add_option("--plan", options.plan,
                          "Plan file, or plan set file (each plan, and the run its phases make)");
  command->add_option("--id", options.plan_id, "With a plan set: simulate only its plan ID")
      ->needs(plan);
  const auto knob = [&](CLI::Option* option) { option->excludes(plan); };
  knob(command->add_option("--model", options.model, "Model preset or file (instead of --plan)"));
  knob(command->add_option("--cluster", options.cluster,
                           "Cluster preset (NAME, NAME:NODES or NAME:NODESxGPUS) or file"));
  const CLI::Validator axis = whole_number_from(1, schemas::kMaxMeshAxisSize);
  const CLI::Validator batch = whole_number_from(1, schemas::kMaxGlobalBatchSize);
  knob(command->add_option("--tp", options.tp, "Tensor-parallel size")->check(axis));
  knob(command->add_option("--pp", options.pp, "Pipeline-parallel size")
           ->check(whole_number_from(1, schemas::kMaxLayers + 2)));
  knob(command->add_option("--cp", options.cp, "Context-parallel size")->check(axis));
  knob(command
           ->add_option("--cp-comm", options.cp_comm,
                        "How cp attention meets the other ranks' keys and values: ring (passed "
                        "around, overlapped) or all_gather (gathered once)")
           ->check(CLI::IsMember({"ring", "all_gather"})));
  knob(command
           ->add_option("--dp", options.dp, "Data-parallel size (default: what the cluster leaves)")
           ->check(axis));
  knob(command->add_option("--vpp", options.vpp, "Model chunks per pipeline rank")
           ->check(whole_number_from(1, schemas::kMaxLayers)));
  knob(command->add_option("--micro-batch", options.micro_batch, "Sequences per micro-batch")
           ->check(batch));
  knob(command->add_option("--global-batch", options.global_batch, "Sequences per step")
           ->check(batch));
  knob(
      command->add_option("--seq-len", options.seq_length, "Sequence length (default: the model's)")
          ->check(whole_number_from(1, schemas::kMaxSeqLength)));
  knob(command->add_option("--recompute", options.recompute, "Activation recomputation")
           ->check(CLI::IsMember({"none", "selective", "full"})));
  // A list option's names, from the enum's table.
  const auto one_of = [](const auto& table) {
    const std::vector<std::string_view> names = schemas::names_of(table);
    return CLI::IsMember(std::vector<std::string>(names.begin(), names.end()));
  };
  knob(command
           ->add_option("--recompute-modules", options.recompute_modules,
                        "With --recompute selective: the modules recomputed, comma-separated "
                        "(Megatron-Core's --recompute-modules; default core_attn)")
           ->delimiter(',')
           ->check(one_of(schemas::kRecomputeModuleNames)));
  knob(command
           ->add_option("--cuda-graph-scope", options.cuda_graph_scope,
                        "Parts replayed from CUDA graphs, comma-separated (Megatron-Core's "
                        "--cuda-graph-scope; default none)")
           ->delimiter(',')
           ->check(one_of(schemas::kCudaGraphScopeNames)));
  knob(command->add_flag("--sequence-parallel", options.sequence_parallel,
                         "Megatron sequence parallelism"));
  knob(
      command->add_option("--zero", options.zero_stage, "ZeRO stage 0-3 (1: distributed optimizer)")
          ->check(whole_number_from(0, 3)));
  knob(command
           ->add_option("--dp-shard", options.dp_shard,
                        "Hybrid sharding: ZeRO shards over groups of N dp ranks (× cp) and "
                        "replicates across them (default: all of dp)")
           ->check(whole_number_from(1, schemas::kMaxMeshAxisSize)));
  knob(command
           ->add_option("--ep", options.ep,
                        "Expert parallelism of a mixture-of-experts model: its experts over N "
                        "ranks of each stage (ep × etp divides tp × cp × dp)")
           ->check(axis));
  knob(command
           ->add_option("--etp", options.etp, "Expert tensor parallelism: each expert over N ranks")
           ->check(axis));
  knob(
      command->add_flag("--ep-comm-overlap", options.ep_comm_overlap,
                        "Run the experts' token all-to-alls beside another micro-batch's compute"));
  knob(command
           ->add_option("--expert-load-imbalance", options.expert_load_imbalance,
                        "Tokens of the busiest expert over the mean (default 1: balanced)")
           ->check(CLI::Range(1.0, static_cast<double>(schemas::kMaxExperts))));
  knob(command->add_flag("--no-overlap-grad-reduce", options.no_overlap_grad_reduce,
                         "Reduce data-parallel gradients after the whole backward"));
  knob(command
           ->add_option("--bucket-size", options.bucket_size,
                        "Parameters per data-parallel gradient bucket (default max(40M, 1M·dp·cp), "
                        "Megatron's)")
           ->check(whole_number_from(1, schemas::kMaxGradientBucketElements)));
  knob(command->add_flag("--tp-comm-overlap", options.tp_comm_overlap,
                         "Pipeline tp all-gathers and reduce-scatters with the GEMMs (needs "
                         "--sequence-parallel)"));
  knob(command
           ->add_option("--attention", options.attention,
                        "Attention kernel: flash (fused, scores never stored) or unfused")
           ->check(CLI::IsMember(choices_of(schemas::kAttentionKernelNames)))
           ->capture_default_str());
  knob(command
           ->add_option("--framework", options.framework,
                        "Training stack whose behaviour to simulate (pipeline sends, gradient "
                        "reduction)")
           ->check(CLI::IsMember(choices_of(schemas::kTrainingFrameworkNames)))
           ->capture_default_str());
  knob(command->add_option("--schedule", options.schedule, "Pipeline schedule")
           ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"})));
  knob(command
           ->add_option("--precision", options.precision,
                        "Training dtype (default: bf16, or the best the cluster's GPU has)")
           ->check(CLI::IsMember(choices_of(schemas::kDtypeNames))));
  knob(command
           ->add_option("--gradient-dtype", options.gradient_dtype,
                        "What gradients accumulate and reduce in (default: fp32, fp16 under fp16; "
                        "bf16 as Megatron's --grad-reduce-in-bf16)")
           ->check(CLI::IsMember({"fp32", "fp16", "bf16"})));
  command
      ->add_option("--mode", options.mode,
                   "symmetric: one rank per pipeline stage (fast); full: every rank")
      ->check(CLI::IsMember({"symmetric", "full"}));
  command->add_option("--trace", options.trace_path,
                      "Write the timeline as a Chrome trace (open in https://ui.perfetto.dev)");
  add_format_option(command, options.format);
  return command;
}

namespace {

// A plan set without --id: every plan's step, the phases as a run, the switches between them.
int run_simulate_set(const SimulateOptions& options, const schemas::PlanSet& set) {
  // A trace lays the plans' steps side by side on world ranks, so each is simulated in full.
  const simulator::SimulationOptions simulation_options{
      .mode = options.mode == "full" || options.trace_path ? simulator::SimulationMode::full
                                                           : simulator::SimulationMode::symmetric,
      .record_timeline = options.trace_path.has_value()};
  const PlanSetPrediction prediction =
      predict_plan_set(set, std::filesystem::path(*options.plan).parent_path(), simulation_options);
  if (options.trace_path) {
    schemas::write_file_atomically(
        *options.trace_path,
        simulator::chrome_trace(phases_timeline(set, prediction)).dump() + "\n");
  }
  if (options.format == OutputFormat::json) {
    std::cout << plan_set_prediction_to_json(set, prediction).dump(2) << "\n";
    return 0;
  }
  std::cout << render_plan_set_prediction(set, prediction);
  if (options.trace_path) {
    std::cout << fmt::format(
        "trace of one step of each {} with the switches between, written to {} (open it in "
        "https://ui.perfetto.dev)\n",
        set.phases.empty() ? "plan" : "phase", *options.trace_path);
  }
  return 0;
}

}  // namespace

int run_simulate(const SimulateOptions& options) {
  schemas::Plan plan;
  std::filesystem::path plan_directory;
  std::string precision_note;
  if (options.plan &&
      schemas::document_kind_of_file(*options.plan) == schemas::DocumentKind::plan_set) {
    const schemas::PlanSet set = schemas::load_plan_set_file(*options.plan);
    if (!options.plan_id) return run_simulate_set(options, set);
    plan = plan_of_set(set, *options.plan_id, *options.plan, "--id").plan;
    plan_directory = std::filesystem::path(*options.plan).parent_path();
  } else if (options.plan) {
    if (options.plan_id) {
      throw schemas::InputError(
          "--id", "", fmt::format("picks a plan of a plan set; {} is a plan file", *options.plan));
    }
    plan = schemas::load_plan_file(*options.plan);
    plan_directory = std::filesystem::path(*options.plan).parent_path();
  } else {
    plan = plan_from_knobs(options, precision_note);
  }
  const simulator::SimulationOptions simulation_options{
      .mode = options.mode == "full" ? simulator::SimulationMode::full
                                     : simulator::SimulationMode::symmetric,
      .record_timeline = options.trace_path.has_value()};
  const simulator::PlanSimulation simulation =
      simulator::simulate_plan(plan, plan_directory, simulation_options);
  if (options.trace_path) {
    schemas::write_file_atomically(
        *options.trace_path, simulator::chrome_trace(simulation.result.timeline).dump() + "\n");
  }
  if (options.format == OutputFormat::json) {
    std::cout << simulator::simulation_to_json(plan, simulation).dump(2) << "\n";
  } else {
    std::cout << render_table(plan, simulation);
    if (!precision_note.empty()) std::cout << precision_note << "\n";
    if (options.trace_path) {
      std::cout << fmt::format("trace written to {} (open it in https://ui.perfetto.dev)\n",
                               *options.trace_path);
    }
  }
  return 0;
}

}  // namespace strata::tools
