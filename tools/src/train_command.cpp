// `strata train`: trains a model with a plan — read from --plan, or made from --model and the
// batch and layout flags (shown with --write-plan) — on a token file, logging each step beside
// the simulator's prediction for the plan, and checkpointing as asked. Under mpirun (or srun) each
// rank runs its part of the plan; rank 0 logs.
//
// A parallel job fails in one of three ways, each ending every rank without a hang: before
// training (bad input: every rank checks its own), the ranks agree on the lowest rank that
// failed, which alone prints its line, and all exit with its status; during training, the
// failing rank prints its line and aborts the job (MPI_Abort).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "commands.h"
#include "failure_report.h"
#include "job_phase.h"
#include "memory_admission.h"
#include "output_check.h"
#include "stall_timeout_option.h"
#include "strata/executor/checkpoint/llmc_checkpoint.h"
#include "strata/executor/distributed/communicator.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/gradient_buckets.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "strata/simulator/plan_simulation.h"
#include "train_trace.h"

namespace strata::tools {
namespace {

constexpr const char* kSingleCpuCluster = "cpu-local";
// Bounds of the training flags (README "Limits"): finite, far above any real run.
constexpr std::int64_t kMaxTrainingSteps = std::int64_t{1} << 40;
constexpr double kMaxLearningRate = 1e3;
constexpr double kMaxWeightDecay = 1e3;
constexpr double kMaxGradientNorm = 1e30;
constexpr const char* kDefaultGpuCluster = "dgx-h100";
// The device of the cpu-local preset: a plan for a cluster of these trains on the CPU.
constexpr const char* kCpuDeviceName = "cpu-core";

// A cluster of CPU ranks: the cpu-local preset, or a file `strata profile` measured on the CPU.
bool is_cpu_cluster(const schemas::ClusterConfig& cluster) {
  return cluster.gpu.name == kCpuDeviceName ||
         (cluster.sources && cluster.sources->backend == "cpu");
}

// The cluster a --model plan of `ranks` CPU ranks is made for: `spec` (a measured file or a
// preset) used with that many ranks — one node's worth, or whole nodes.
schemas::ClusterConfig cpu_cluster_of(const std::string& spec, std::int64_t ranks) {
  schemas::ClusterConfig cluster = schemas::resolve_cluster(spec);
  if (!is_cpu_cluster(cluster)) {
    throw schemas::InputError("--cluster", "",
                              fmt::format("{} is a GPU cluster: add --device cuda, or give a "
                                          "file strata profile measured on the CPU",
                                          spec));
  }
  if (cluster.world_size() == ranks) return cluster;
  const std::string counts = ranks <= cluster.gpus_per_node
                                 ? fmt::format("1x{}", ranks)
                                 : fmt::format("{}", ranks / cluster.gpus_per_node);
  if (ranks > cluster.gpus_per_node && ranks % cluster.gpus_per_node != 0) {
    throw schemas::InputError("--cluster", "",
                              fmt::format("the plan's {} ranks do not fill whole nodes of {} ({})",
                                          ranks, cluster.gpus_per_node, spec));
  }
  return schemas::with_node_counts(std::move(cluster), spec, counts);
}

executor::Device parse_device(const std::string& name) {
  return name == "cuda" ? executor::Device::cuda : executor::Device::cpu;
}

// One GPU of a GPU cluster's node (a preset, or a file `strata profile --device cuda` measured):
// what a --model plan on cuda is planned for.
schemas::ClusterConfig one_gpu_of(const std::string& spec) {
  schemas::ClusterConfig cluster = schemas::resolve_cluster(spec);
  if (is_cpu_cluster(cluster)) {
    throw schemas::InputError("--cluster", "",
                              fmt::format("{} is a cluster of CPU ranks: on cuda give a GPU "
                                          "preset or a file strata profile --device cuda wrote",
                                          spec));
  }
  cluster.nodes = 1;
  cluster.gpus_per_node = 1;
  cluster.name += " (one GPU)";
  return cluster;
}

// The plan `strata train --model M` runs: the batch, precision and layout from the flags; on the
// CPU a cpu-local cluster of tp·dp ranks (dp: what the job's ranks leave after tp), on cuda one
// GPU.
schemas::Plan plan_from_flags(const TrainOptions& options, executor::Device device,
                              std::int64_t world_size) {
  if (!options.model && !options.init_llmc) {
    throw schemas::InputError("command line", "", "give --plan, --model or --init-llmc");
  }
  const schemas::ModelConfig model = options.model
                                         ? schemas::resolve_model(*options.model)
                                         : executor::read_llmc_model_config(*options.init_llmc);
  schemas::PlanKnobs knobs;
  knobs.seq_length = options.seq_length.value_or(std::min<std::int64_t>(model.max_seq_length, 256));
  knobs.micro_batch_size = options.micro_batch;
  knobs.mesh.tp = options.tp;
  knobs.mesh.pp = options.pp;
  knobs.mesh.vpp = options.vpp;
  knobs.mesh.dp =
      options.dp.value_or(std::max<std::int64_t>(1, world_size / (options.tp * options.pp)));
  knobs.schedule = options.schedule
                       ? *schemas::value_of(*options.schedule, schemas::kScheduleTypeNames)
                   : options.vpp > 1 ? schemas::ScheduleType::interleaved_one_f_one_b
                                     : schemas::ScheduleType::one_f_one_b;
  knobs.global_batch_size = options.global_batch.value_or(options.micro_batch * knobs.mesh.dp);
  knobs.sequence_parallel = options.sequence_parallel;
  knobs.zero_stage = options.zero_stage;
  knobs.overlap_grad_reduce = !options.no_overlap_grad_reduce;
  knobs.gradient_bucket_elements = options.bucket_size;
  knobs.recompute = *schemas::value_of(options.recompute, schemas::kRecomputeGranularityNames);
  const bool cuda = device == executor::Device::cuda;
  knobs.precision = options.precision == std::string("bf16") || (!options.precision && cuda)
                        ? schemas::Dtype::bf16
                        : schemas::Dtype::fp32;
  const std::int64_t ranks = knobs.mesh.tp * knobs.mesh.dp * knobs.mesh.pp;
  const schemas::ClusterConfig cluster =
      cuda              ? one_gpu_of(options.cluster.value_or(kDefaultGpuCluster))
      : options.cluster ? cpu_cluster_of(*options.cluster, ranks)
                        : schemas::resolve_cluster(fmt::format("{}:{}", kSingleCpuCluster, ranks));
  schemas::Plan plan = schemas::build_plan(model, cluster, knobs, "command line");
  plan.description = ranks == 1
                         ? fmt::format("{} on one {}, written by strata train", model.name,
                                       cuda ? "GPU" : "CPU device")
                         : fmt::format(
                               "{} on {} CPU ranks (tp {} × dp {} × pp {}), written by strata "
                               "train",
                               model.name, ranks, knobs.mesh.tp, knobs.mesh.dp, knobs.mesh.pp);
  return plan;
}

// Where a model that --init-llmc weights are loaded into differs from what the llm.c file says
// (llm.c's GPT-2 trains without dropout and holds no other setting than the shape), one sentence
// each: the same weights would otherwise give different runs with no word of why. A differing
// shape is an error when the weights are read.
std::vector<std::string> llmc_setting_notes(const schemas::ModelConfig& model,
                                            const std::filesystem::path& llmc) {
  const schemas::ModelConfig file = executor::read_llmc_model_config(llmc);
  std::vector<std::string> notes;
  if (model.dropout != file.dropout) {
    notes.push_back(fmt::format(
        "note: {} trains with dropout {} where the llm.c file {} has none (llm.c trains without "
        "dropout): losses will differ from llm.c's; --model with a model file whose dropout is 0 "
        "(or --init-llmc alone) matches it",
        model.name, model.dropout, llmc.string()));
  }
  if (model.max_seq_length != file.max_seq_length) {
    notes.push_back(fmt::format("note: {} allows {} positions where the llm.c file {} has {}",
                                model.name, model.max_seq_length, llmc.string(),
                                file.max_seq_length));
  }
  if (model.norm_epsilon != file.norm_epsilon) {
    notes.push_back(fmt::format("note: {} normalises with epsilon {} where llm.c uses {}",
                                model.name, model.norm_epsilon, file.norm_epsilon));
  }
  return notes;
}

// What the simulator predicts for the plan on the cluster it names, for the log.
struct Prediction {
  double step_time_s = 0;
  double peak_bytes = 0;          // the largest of any rank
  simulator::RankMemory largest;  // that rank's memory, part by part
  // Data-parallel gradient buckets the simulator prices on rank 0 (its pipeline rank's stages);
  // 0 without data parallelism.
  std::size_t rank0_gradient_buckets = 0;
};

Prediction predict(const schemas::Plan& plan, const std::filesystem::path& plan_directory) {
  const simulator::PlanSimulation simulation = simulator::simulate_plan(plan, plan_directory);
  Prediction prediction{simulation.metrics.step_time_s, 0, {}, 0};
  prediction.rank0_gradient_buckets =
      simulator::gradient_buckets_per_pipeline_rank(plan, simulation).front();
  for (const simulator::RankMemory& memory : simulation.result.memory) {
    if (memory.peak_bytes >= prediction.peak_bytes) prediction.largest = memory;
    prediction.peak_bytes = std::max(prediction.peak_bytes, memory.peak_bytes);
  }
  return prediction;
}

// Where a step's data came from: its epoch in a sequential order, and with --log-samples the
// offset of every sample of the global batch in the data file.
struct StepData {
  const executor::BatchSampler& sampler;
  std::int64_t global_batch = 0;
  bool log_samples = false;
};

void print_step(const executor::StepRecord& record, std::int64_t steps,
                const Prediction& prediction, const StepData& data, LogFormat format) {
  const double ratio = record.step_time_s / prediction.step_time_s;
  const std::int64_t step_index = record.step - 1;
  const std::optional<std::int64_t> epoch = data.sampler.epoch_of(step_index);
  std::vector<std::int64_t> samples;
  if (data.log_samples) {
    for (std::int64_t sample = 0; sample < data.global_batch; ++sample) {
      samples.push_back(data.sampler.window_start(step_index, sample));
    }
  }
  if (format == LogFormat::json) {
    nlohmann::json line{{"step", record.step},
                        {"loss", record.loss},
                        {"learning_rate", record.learning_rate},
                        {"gradient_norm", record.gradient_norm},
                        {"tokens_per_s", record.tokens_per_s},
                        {"step_time_s", record.step_time_s},
                        {"communication_s", record.communication_s},
                        {"predicted_step_time_s", prediction.step_time_s},
                        {"measured_over_predicted", ratio},
                        {"peak_device_bytes", record.peak_device_bytes},
                        {"peak_host_bytes", record.peak_host_bytes},
                        {"peak_model_host_bytes", record.peak_model_host_bytes},
                        {"predicted_peak_bytes", prediction.peak_bytes}};
    if (epoch) line["epoch"] = *epoch;
    if (data.log_samples) line["samples"] = samples;
    std::cout << line.dump() << std::endl;
    return;
  }
  // Beside the prediction, the memory it predicts: on a GPU the tensors' peak, on the CPU the
  // resident set's growth since before the model was built (the process's own baseline aside).
  constexpr double kGiB = 1u << 30;
  std::string memory;
  if (record.peak_device_bytes > 0) {
    memory = fmt::format(" | peak {:.2f} GiB (predicted {:.2f})",
                         static_cast<double>(record.peak_device_bytes) / kGiB,
                         prediction.peak_bytes / kGiB);
  } else if (record.peak_host_bytes > 0) {
    memory = fmt::format(" | model memory {:.2f} GiB (predicted {:.2f}; RSS {:.2f})",
                         static_cast<double>(record.peak_model_host_bytes) / kGiB,
                         prediction.peak_bytes / kGiB,
                         static_cast<double>(record.peak_host_bytes) / kGiB);
  }
  fmt::print(
      "step {:>{}}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tokens/s | {:.1f} "
      "ms (predicted {:.1f} ms, ×{:.2f}){}{}{}{}\n",
      record.step, fmt::formatted_size("{}", steps), steps, record.loss, record.learning_rate,
      record.gradient_norm, record.tokens_per_s, record.step_time_s * 1e3,
      prediction.step_time_s * 1e3, ratio,
      record.communication_s > 0
          ? fmt::format(" | comm {:.0f}%", 100 * record.communication_s / record.step_time_s)
          : std::string(),
      memory, epoch ? fmt::format(" | epoch {}", *epoch) : std::string(),
      data.log_samples ? fmt::format(" | samples {}", fmt::join(samples, ",")) : std::string());
  std::fflush(stdout);
}

void print_evaluation(const executor::EvaluationRecord& record, std::int64_t steps,
                      LogFormat format) {
  if (format == LogFormat::json) {
    std::cout << nlohmann::json{{"eval_step", record.step},
                                {"validation_loss", record.loss},
                                {"eval_batches", record.batches},
                                {"eval_time_s", record.seconds}}
                     .dump()
              << std::endl;
    return;
  }
  fmt::print("step {:>{}}/{} | val loss {:.4f} | {} batch{} in {:.1f} ms\n", record.step,
             fmt::formatted_size("{}", steps), steps, record.loss, record.batches,
             record.batches == 1 ? "" : "es", record.seconds * 1e3);
  std::fflush(stdout);
}

// Rank 0's data-parallel gradient buckets, as run and as the simulator priced them.
struct GradientBuckets {
  std::size_t run = 0, predicted = 0;
};

void print_summary(const executor::TrainingSummary& summary,
                   const std::vector<std::string>& resume_changes,
                   const std::vector<std::string>& notes, const executor::TrainingOptions& training,
                   const std::optional<GradientBuckets>& buckets, LogFormat format) {
  if (format == LogFormat::json) {
    nlohmann::json line{{"summary", true},
                        // Numbered as the step records are: the run trained first..last.
                        {"first_step", summary.first_step + 1},
                        {"last_step", summary.first_step + summary.steps_run},
                        {"steps_run", summary.steps_run},
                        {"final_loss", summary.final_loss},
                        {"mean_tokens_per_s", summary.mean_tokens_per_s},
                        {"total_time_s", summary.total_time_s}};
    if (summary.steps_run == 0) line["final_loss"] = nullptr;  // no step, no loss
    if (summary.last_checkpoint) line["checkpoint"] = summary.last_checkpoint->string();
    if (!summary.evaluations.empty()) {
      line["first_validation_loss"] = summary.evaluations.front().loss;
      line["final_validation_loss"] = summary.evaluations.back().loss;
    }
    if (!resume_changes.empty()) line["resume_changes"] = resume_changes;
    if (!notes.empty()) line["notes"] = notes;
    if (buckets) {
      line["gradient_buckets"] = buckets->run;
      line["predicted_gradient_buckets"] = buckets->predicted;
    }
    // What the optimizer did, defaults included, so a log says how to repeat the run.
    line["optimizer"] = {{"learning_rate", training.learning_rate},
                         {"lr_schedule", schemas::name_of(training.learning_rate_decay,
                                                          executor::kLearningRateDecayNames)},
                         {"min_lr_fraction", training.min_learning_rate_fraction},
                         {"warmup_steps", training.warmup_steps},
                         {"beta1", training.adamw.beta1},
                         {"beta2", training.adamw.beta2},
                         {"eps", training.adamw.epsilon},
                         {"weight_decay", training.adamw.weight_decay},
                         {"grad_clip", training.max_gradient_norm}};
    std::cout << line.dump() << std::endl;
    return;
  }
  if (summary.steps_run == 0) {
    // --steps 0: the initial model, written out.
    fmt::print("no steps trained (--steps 0){}\n",
               summary.last_checkpoint ? fmt::format(": initial model in checkpoint {}",
                                                     summary.last_checkpoint->string())
                                       : std::string());
    return;
  }
  fmt::print("trained steps {}..{} in {:.1f} s: final loss {:.4f}{}, {:.0f} tokens/s{}\n",
             summary.first_step + 1, summary.first_step + summary.steps_run, summary.total_time_s,
             summary.final_loss,
             summary.evaluations.empty()
                 ? std::string()
                 : fmt::format(" (validation {:.4f})", summary.evaluations.back().loss),
             summary.mean_tokens_per_s,
             summary.last_checkpoint
                 ? fmt::format(", checkpoint {}", summary.last_checkpoint->string())
                 : std::string());
}

void print_trace(const TrainTrace& trace, const std::string& file, std::int64_t step,
                 LogFormat format) {
  if (format == LogFormat::json) {
    nlohmann::json actions = nlohmann::json::array();
    for (const ActionTypeComparison& entry : trace.by_type) {
      actions.push_back({{"type", entry.type},
                         {"measured_count", entry.measured_count},
                         {"measured_mean_s", entry.measured_mean_s},
                         {"predicted_count", entry.predicted_count},
                         {"predicted_mean_s", entry.predicted_mean_s}});
    }
    std::cout << nlohmann::json{{"trace", file},
                                {"traced_step", step},
                                {"measured_step_s", trace.measured_step_s},
                                {"predicted_step_s", trace.predicted_step_s},
                                {"measured_bubble", trace.measured_bubble},
                                {"predicted_bubble", trace.predicted_bubble},
                                {"actions", actions}}
                     .dump()
              << std::endl;
    return;
  }
  fmt::print("trace of step {} written to {} (open it in https://ui.perfetto.dev)\n", step, file);
  fmt::print(
      "step {:.1f} ms (predicted {:.1f} ms); bubble, outside F/B/I/W/STEP: {:.1f}% "
      "(predicted {:.1f}%)\n",
      trace.measured_step_s * 1e3, trace.predicted_step_s * 1e3, 100 * trace.measured_bubble,
      100 * trace.predicted_bubble);
  fmt::print("rank 0, per action: {:<12} {:>6} {:>12} {:>6} {:>12} {:>8}\n", "type", "count",
             "measured ms", "count", "predicted ms", "ratio");
  for (const ActionTypeComparison& entry : trace.by_type) {
    const bool both = entry.measured_count > 0 && entry.predicted_mean_s > 0;
    fmt::print("                    {:<12} {:>6} {:>12.3f} {:>6} {:>12.3f} {:>8}\n", entry.type,
               entry.measured_count, entry.measured_mean_s * 1e3, entry.predicted_count,
               entry.predicted_mean_s * 1e3,
               both ? fmt::format("×{:.2f}", entry.measured_mean_s / entry.predicted_mean_s)
                    : std::string("-"));
  }
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainOptions& options) {
  CLI::App* command = app.add_subcommand(
      "train",
      "Train a model with a plan on a token file: on the CPU or one GPU, or under mpirun with "
      "the plan's tensor, sequence, data and pipeline parallelism and ZeRO");
  CLI::Option* plan = command->add_option(
      "--plan", options.plan,
      "Plan file to run (fp32 on the CPU, any tp/sp/dp/pp/ZeRO layout and schedule with cp = 1, "
      "one rank per mesh position under mpirun; fp32 or bf16 on one GPU)");
  command
      ->add_option("--model", options.model, "Model preset or file, trained with the plan it makes")
      ->excludes(plan);
  command
      ->add_option("--micro-batch", options.micro_batch, "Sequences per micro-batch (with --model)")
      ->check(whole_number_from(1, schemas::kMaxGlobalBatchSize))
      ->capture_default_str()
      ->excludes(plan);
  command
      ->add_option("--global-batch", options.global_batch,
                   "Sequences per optimizer step, accumulated over micro-batches (default: one "
                   "micro-batch)")
      ->check(whole_number_from(1, schemas::kMaxGlobalBatchSize))
      ->excludes(plan);
  command
      ->add_option("--seq-len", options.seq_length,
                   "Tokens per sequence (default min(256, model max))")
      ->check(whole_number_from(1, schemas::kMaxSeqLength))
      ->excludes(plan);
  command->add_option("--write-plan", options.write_plan, "Write the plan --model makes to FILE")
      ->excludes(plan);
  command->add_option("--tp", options.tp, "Tensor-parallel size of a --model plan")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
      ->excludes(plan);
  command
      ->add_option("--dp", options.dp,
                   "Data-parallel size of a --model plan (default: the job's ranks / tp)")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
      ->excludes(plan);
  command->add_option("--pp", options.pp, "Pipeline-parallel size of a --model plan (even split)")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
      ->excludes(plan);
  command
      ->add_option("--vpp", options.vpp,
                   "Model chunks per pipeline rank of a --model plan (interleaved schedule)")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
      ->excludes(plan);
  command
      ->add_option("--schedule", options.schedule,
                   "Pipeline schedule of a --model plan: gpipe, 1f1b, interleaved-1f1b or zb-h1 "
                   "(default 1f1b; interleaved-1f1b with --vpp > 1)")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"}))
      ->excludes(plan);
  command
      ->add_flag("--sequence-parallel", options.sequence_parallel,
                 "Sequence parallelism in a --model plan (needs --tp > 1)")
      ->excludes(plan);
  command
      ->add_option("--zero", options.zero_stage,
                   "ZeRO stage of a --model plan: 0-3 (1: distributed optimizer)")
      ->check(whole_number_from(0, 3))
      ->excludes(plan);
  command
      ->add_option("--recompute", options.recompute,
                   "Activation recomputation of a --model plan: none, selective or full")
      ->check(CLI::IsMember({"none", "selective", "full"}))
      ->excludes(plan);
  command
      ->add_flag("--no-overlap-grad-reduce", options.no_overlap_grad_reduce,
                 "Reduce gradients after the whole backward in a --model plan")
      ->excludes(plan);
  command
      ->add_option("--bucket-size", options.bucket_size,
                   "Gradient-reduction bucket of a --model plan, in parameters: its "
                   "gradient_bucket_elements, which the prediction prices too (default "
                   "max(40M, 1M·dp), Megatron's)")
      ->check(whole_number_from(1, schemas::kMaxGradientBucketElements))
      ->excludes(plan);
  command->add_option("--data", options.data, "Token file (llm.c format; see strata data)")
      ->required();
  command->add_option("--trace", options.trace,
                      "Write one step as every rank ran it, beside the simulator's prediction, as "
                      "a Chrome trace (open in https://ui.perfetto.dev)");
  command
      ->add_option("--trace-step", options.trace_step,
                   "The step --trace records (default: the last)")
      ->check(whole_number_from(1, kMaxTrainingSteps));
  command
      ->add_option("--data-order", options.data_order,
                   "random windows per (seed, step, sample); sequential: llm.c's loader, batch k "
                   "the B·T+1 tokens from k·B·T, wrapping; shuffled: those batches in a seeded "
                   "order per epoch")
      ->check(CLI::IsMember({"random", "sequential", "shuffled"}))
      ->capture_default_str();
  command->add_flag("--log-samples", options.log_samples,
                    "Name each step's samples (their first token's offset in the data file)");
  command
      ->add_option(
          "--steps", options.steps,
          "Optimizer steps in total (a resumed run included; 0: write the initial model and stop)")
      ->check(whole_number_from(0, kMaxTrainingSteps))
      ->capture_default_str();
  command->add_option("--seed", options.seed, "Seed of init, data order and dropout (default 1234)")
      ->check(seed_value());
  // The optimizer's settings show their defaults in --help (and in README's table).
  command->add_option("--lr", options.learning_rate, "Peak learning rate")
      ->check(number_from(0, kMaxLearningRate, true))
      ->capture_default_str();
  command
      ->add_option("--lr-schedule", options.lr_schedule,
                   "After warm-up: cosine or linear decay to the floor, or constant")
      ->check(CLI::IsMember({"cosine", "linear", "constant"}))
      ->capture_default_str();
  command
      ->add_option("--min-lr-fraction", options.min_lr_fraction,
                   "Floor of the decay as a fraction of the peak")
      ->check(number_from(0.0, 1.0))
      ->capture_default_str();
  command->add_option("--warmup-steps", options.warmup_steps, "Linear warm-up steps")
      ->check(whole_number_from(0, kMaxTrainingSteps))
      ->capture_default_str();
  command->add_option("--beta1", options.beta1, "AdamW first-moment decay")
      ->check(number_from(0.0, 1.0))
      ->capture_default_str();
  command->add_option("--beta2", options.beta2, "AdamW second-moment decay")
      ->check(number_from(0.0, 1.0))
      ->capture_default_str();
  command->add_option("--eps", options.eps, "AdamW epsilon")
      ->check(number_from(0.0, 1.0, true))
      ->capture_default_str();
  command->add_option("--weight-decay", options.weight_decay, "AdamW weight decay of matrices")
      ->check(number_from(0, kMaxWeightDecay))
      ->capture_default_str();
  command->add_option("--grad-clip", options.grad_clip, "Global gradient-norm limit (0: none)")
      ->check(number_from(0, kMaxGradientNorm))
      ->capture_default_str();
  command->add_option("--checkpoint-dir", options.checkpoint_dir, "Directory for checkpoints");
  command
      ->add_option("--checkpoint-every", options.checkpoint_every,
                   "Checkpoint every K steps (and after the last)")
      ->check(whole_number_from(0, kMaxTrainingSteps));
  command->add_flag("--resume", options.resume,
                    "Continue from the newest checkpoint in --checkpoint-dir");
  command
      ->add_flag("--overwrite-checkpoints", options.overwrite_checkpoints,
                 "A new run into a --checkpoint-dir that holds checkpoints removes them (without "
                 "it, such a run is refused: --resume continues the run they belong to)")
      ->excludes("--resume");
  command
      ->add_option_function<std::string>(
          "--memory-check",
          [&options](const std::string& value) { options.memory_check = value == "on"; },
          "on (default): refuse a job whose ranks would need more memory than their host "
          "(on a GPU: their device) has available (the simulator's peak per rank); off: start "
          "it anyway")
      ->check(CLI::IsMember({"on", "off"}))
      ->option_text("on|off");
  add_stall_timeout_option(*command, options.stall_timeout_s);
  command->add_flag("--resume-with-changes", options.resume_with_changes,
                    "With --resume: continue although the global batch, sequence length, "
                    "precision or data file differs from the checkpoint's run");
  command->add_option("--init-llmc", options.init_llmc, "Start from an llm.c GPT-2 model file");
  command->add_option("--save-llmc", options.save_llmc, "Write the trained model as an llm.c file");
  command->add_option("--val-data", options.val_data,
                      "Validation token file: its loss before the first step, after the last and "
                      "every --eval-every steps");
  command
      ->add_option("--eval-every", options.eval_every,
                   "Validate every K steps too (default 0: only before the first and after the "
                   "last)")
      ->check(whole_number_from(0, kMaxTrainingSteps));
  command
      ->add_option("--eval-batches", options.eval_batches,
                   "Global batches of --val-data per validation, read in order from its start "
                   "(default 10)")
      ->check(whole_number_from(1, kMaxTrainingSteps));
  command
      ->add_option("--device", options.device,
                   "cpu or cuda (default: cuda when the plan's cluster is a GPU one, cpu for "
                   "cpu-local and --model)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->option_text("cpu|cuda");
  command
      ->add_option("--precision", options.precision,
                   "fp32, or bf16 mixed precision on cuda (with --model; default fp32 on the CPU, "
                   "bf16 on cuda)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->option_text("fp32|bf16")
      ->excludes(plan);
  command
      ->add_option("--cluster", options.cluster,
                   "The cluster a --model plan is made for: on cuda a GPU preset or a file strata "
                   "profile --device cuda measured, whose one GPU it uses (default dgx-h100); on "
                   "the CPU a file strata profile measured (default the cpu-local preset)")
      ->excludes(plan);
  command
      ->add_option_function<std::string>(
          "--log-format",
          [&options](const std::string& name) {
            options.log_format = name == "json" ? LogFormat::json : LogFormat::text;
          },
          "Log lines: text (default) or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->option_text("text|json");
  return command;
}

namespace {

int train(const TrainOptions& options, executor::Communicator& world) {
  const bool logs = world.rank() == 0;
  std::string plan_source = "command line";
  schemas::Plan plan;
  std::filesystem::path plan_directory;
  executor::Device device = options.device ? parse_device(*options.device) : executor::Device::cpu;
  std::optional<executor::TokenFile> data;
  std::optional<executor::TokenFile> validation;
  executor::TrainingOptions training;
  Prediction prediction;
  std::vector<std::string> notes;  // said first in the log, and in the JSON summary
  // A job of several ranks never waits forever on one that stopped.
  arm_stall_timeout(world, options.stall_timeout_s);
  // Phase 1, on each rank alone: the plan, the checks, the data.
  run_phase(world, [&] {
    if (options.plan) {
      plan = schemas::load_plan_file(*options.plan);
      plan_source = *options.plan;
      plan_directory = std::filesystem::path(*options.plan).parent_path();
      if (!options.device && !is_cpu_cluster(plan.cluster)) {
        device = executor::Device::cuda;  // the plan is for a GPU cluster
      }
    } else {
      if (options.precision == std::string("bf16") && device != executor::Device::cuda) {
        throw schemas::InputError("--precision", "", "bf16 trains on a GPU: add --device cuda");
      }
      plan = plan_from_flags(options, device, world.size());
      if (options.write_plan && logs) {
        schemas::write_json_document(*options.write_plan, schemas::plan_to_json(plan));
      }
    }
    executor::check_plan_runs(plan, plan_source, device, world.size());
    if (options.init_llmc) notes = llmc_setting_notes(plan.model, *options.init_llmc);
    data = executor::read_token_file(options.data);
    if (options.val_data) {
      validation = executor::read_token_file(*options.val_data);
    } else {
      for (const auto& [flag, given] : {std::pair{"--eval-every", options.eval_every.has_value()},
                                        {"--eval-batches", options.eval_batches.has_value()}}) {
        if (given) throw schemas::InputError(flag, "", "needs --val-data FILE to evaluate on");
      }
    }
    training.eval_every = options.eval_every.value_or(0);
    training.eval_batches = options.eval_batches.value_or(10);
    prediction = predict(plan, plan_directory);
    training.steps = options.steps;
    training.seed = options.seed.value_or(1234);
    training.learning_rate = options.learning_rate;
    training.min_learning_rate_fraction = options.min_lr_fraction;
    training.warmup_steps = options.warmup_steps;
    training.adamw.weight_decay = options.weight_decay;
    training.adamw.beta1 = options.beta1;
    training.adamw.beta2 = options.beta2;
    training.adamw.epsilon = options.eps;
    training.data_order = *schemas::value_of(options.data_order, executor::kDataOrderNames);
    training.learning_rate_decay =
        *schemas::value_of(options.lr_schedule, executor::kLearningRateDecayNames);
    training.max_gradient_norm = options.grad_clip;
    if (options.checkpoint_dir) training.checkpoint_dir = *options.checkpoint_dir;
    training.checkpoint_every = options.checkpoint_every;
    training.resume = options.resume;
    training.resume_with_changes = options.resume_with_changes;
    training.overwrite_checkpoints = options.overwrite_checkpoints;
    if (options.init_llmc) training.init_llmc = *options.init_llmc;
    training.device = device;
    training.plan_directory = plan_directory.empty() ? "." : plan_directory;
    if (options.trace_step && !options.trace) {
      throw schemas::InputError("--trace-step", "", "needs --trace FILE to write the step to");
    }
    if (options.trace && options.steps == 0) {
      throw schemas::InputError("--trace", "", "--steps 0 runs no step to trace");
    }
    if (options.trace) training.trace_step = options.trace_step.value_or(options.steps);
    for (const auto& [flag, beta] :
         {std::pair{"--beta1", options.beta1}, {"--beta2", options.beta2}}) {
      // At 1 the moment never forgets and Adam's bias correction divides by zero.
      if (beta >= 1) throw schemas::InputError(flag, "", fmt::format("{} must be below 1", beta));
    }
    // Files written after the last step are checked now, not after hours of training.
    if (logs && options.save_llmc) check_output_file(*options.save_llmc, "--save-llmc");
    if (logs && options.trace) check_output_file(*options.trace, "--trace");
    if (options.trace_step && *options.trace_step > options.steps) {
      throw schemas::InputError(
          "--trace-step", "",
          fmt::format("{} is past the run's last step {}", *options.trace_step, options.steps));
    }
  });
  // Admission: on the CPU the ranks of each host together must fit in what it has (every rank is
  // charged the largest pipeline stage's peak); on a GPU the rank must fit in what its device
  // has free.
  if (options.memory_check) {
    run_phase(world, [&] {
      if (device == executor::Device::cpu) {
        check_host_memory(prediction.largest, world);
      } else {
        check_gpu_memory(prediction.largest);
      }
    });
  }
  // Phase 2: the trainer — the process groups (collective), then each rank's own model, shards
  // and checkpoint.
  std::unique_ptr<executor::Trainer> trainer;
  run_phase(world, [&] {
    trainer = std::make_unique<executor::Trainer>(plan, plan_source, *data, training, &world);
    if (validation) trainer->set_validation_data(*validation);
    if (options.resume && options.seed && *options.seed != trainer->seed()) {
      // Data order and dropout follow the checkpoint's seed; another would not continue the run.
      throw schemas::InputError("--seed", "",
                                fmt::format("{} differs from the checkpoint's seed {}; a resumed "
                                            "run keeps its seed",
                                            *options.seed, trainer->seed()));
    }
    if (options.trace && training.trace_step <= trainer->completed_steps() &&
        trainer->completed_steps() < options.steps) {
      throw schemas::InputError("--trace-step", "",
                                fmt::format("step {} was run before the checkpoint this run "
                                            "resumes at step {}",
                                            training.trace_step, trainer->completed_steps()));
    }
    if (trainer->completed_steps() > options.steps) {
      throw schemas::InputError(
          "--steps", "",
          fmt::format("{} is below the checkpoint's step {}: nothing to train (--steps counts "
                      "the steps of the whole run)",
                      options.steps, trainer->completed_steps()));
    }
  });
  if (trainer->completed_steps() == options.steps && options.steps > 0) {
    // A finished run started again: say so, leave the checkpoint alone.
    if (!logs) return 0;
    if (options.log_format == LogFormat::json) {
      std::cout << nlohmann::json{{"summary", true},
                                  {"first_step", trainer->completed_steps() + 1},
                                  {"last_step", trainer->completed_steps()},
                                  {"steps_run", 0},
                                  {"message", "nothing to train"}}
                       .dump()
                << std::endl;
    } else {
      fmt::print("nothing to train: the checkpoint is at step {}, and --steps is {}\n",
                 trainer->completed_steps(), options.steps);
    }
    return 0;
  }
  // Rank 0's buckets beside the simulator's count of them: the same rule, the plan's size.
  std::optional<GradientBuckets> gradient_buckets;
  if (plan.mesh.dp * plan.mesh.cp > 1) {
    gradient_buckets = GradientBuckets{trainer->bucket_count(), prediction.rank0_gradient_buckets};
  }
  if (logs && options.log_format == LogFormat::text) {
    for (const std::string& note : notes) fmt::print("{}\n", note);
    for (const std::string& change : trainer->resume_changes()) {
      fmt::print("resuming with a change: {}\n", change);
    }
    if (world.size() > 1) {
      fmt::print(
          "{} ranks: tp {} × dp {}{}{}, ZeRO-{}, {} over {}\n", world.size(), plan.mesh.tp,
          plan.mesh.dp, plan.sequence_parallel ? " with sequence parallelism" : "",
          plan.mesh.pp > 1
              ? fmt::format(" × pp {}{} ({})", plan.mesh.pp,
                            plan.mesh.vpp > 1 ? fmt::format(" × vpp {}", plan.mesh.vpp) : "",
                            schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames))
              : std::string(),
          plan.zero_stage, plan.model.name, world.backend());
    }
    if (gradient_buckets) {
      fmt::print(
          "gradient buckets on rank 0: {} at a bucket size of {} parameters (predicted {})\n",
          gradient_buckets->run, schemas::gradient_bucket_elements(plan),
          gradient_buckets->predicted);
    }
  }
  // Phase 3: training. A rank that fails now may leave others inside a collective: it says why
  // and ends the job.
  try {
    const executor::TrainingSummary summary = trainer->run(
        [&](const executor::StepRecord& record) {
          if (logs) {
            print_step(
                record, options.steps, prediction,
                StepData{trainer->sampler(), plan.batch.global_batch_size, options.log_samples},
                options.log_format);
          }
        },
        [&](const executor::EvaluationRecord& record) {
          if (logs) print_evaluation(record, options.steps, options.log_format);
        });
    if (logs) {
      print_summary(summary, trainer->resume_changes(), notes, training, gradient_buckets,
                    options.log_format);
    }
    if (options.trace && logs) {
      print_trace(
          write_train_trace(*options.trace, plan, plan_directory, trainer->traced_actions()),
          *options.trace, training.trace_step, options.log_format);
    }
    if (options.save_llmc) {
      // Every rank's slices and shards assembled (on one device: its own values, on the host).
      executor::ParameterStore whole(executor::transformer_parameters(plan.model),
                                     executor::ScalarType::float32);
      trainer->gather_parameters(whole);
      if (logs) executor::write_llmc_checkpoint(*options.save_llmc, plan.model, whole);
    }
    if (!std::isfinite(summary.final_loss)) {
      if (logs)
        std::fprintf(stderr, "strata: training diverged: the loss is %f\n", summary.final_loss);
      return 1;
    }
    return 0;
  } catch (...) {
    if (world.size() == 1) throw;
    const FailureReport report = failure_report(std::current_exception());
    std::fprintf(stderr, "strata: rank %d: %s\n", world.rank(), report.line.c_str());
    world.abort(report.exit_code);
  }
}

}  // namespace

int run_train(const TrainOptions& options) {
  try {
    return train(options, executor::world_communicator());
  } catch (const ReportedFailure& failure) {
    return failure.exit_code;
  }
}

}  // namespace strata::tools
