// `strata train`: trains a model with a plan — read from --plan, or made from --model and the
// batch flags for one CPU device (shown with --write-plan) — on a token file, logging each step
// and checkpointing as asked.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "commands.h"
#include "strata/executor/checkpoint/llmc_checkpoint.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

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

executor::Device parse_device(const std::string& name) {
  return name == "cuda" ? executor::Device::cuda : executor::Device::cpu;
}

// One GPU of a cluster preset's node: what a --model plan on cuda is planned for.
schemas::ClusterConfig one_gpu_of(const std::string& preset) {
  schemas::ClusterConfig cluster = schemas::cluster_preset(preset);
  cluster.nodes = 1;
  cluster.gpus_per_node = 1;
  cluster.name += " (one GPU)";
  return cluster;
}

// The plan `strata train --model M` runs: one device, the batch and precision from the flags.
schemas::Plan single_device_plan(const TrainOptions& options, executor::Device device) {
  if (!options.model && !options.init_llmc) {
    throw schemas::InputError("command line", "", "give --plan, --model or --init-llmc");
  }
  const schemas::ModelConfig model = options.model
                                         ? schemas::resolve_model(*options.model)
                                         : executor::read_llmc_model_config(*options.init_llmc);
  schemas::PlanKnobs knobs;
  knobs.seq_length = options.seq_length.value_or(std::min<std::int64_t>(model.max_seq_length, 256));
  knobs.micro_batch_size = options.micro_batch;
  knobs.global_batch_size = options.global_batch.value_or(options.micro_batch);
  knobs.recompute = schemas::RecomputeGranularity::none;
  const bool cuda = device == executor::Device::cuda;
  knobs.precision = options.precision == std::string("bf16") || (!options.precision && cuda)
                        ? schemas::Dtype::bf16
                        : schemas::Dtype::fp32;
  const schemas::ClusterConfig cluster =
      cuda ? one_gpu_of(options.cluster.value_or(kDefaultGpuCluster))
           : schemas::cluster_preset(kSingleCpuCluster);
  schemas::Plan plan = schemas::build_plan(model, cluster, knobs, "command line");
  plan.description =
      fmt::format("{} on one {}, written by strata train", model.name, cuda ? "GPU" : "CPU device");
  return plan;
}

void print_step(const executor::StepRecord& record, std::int64_t steps, LogFormat format) {
  if (format == LogFormat::json) {
    std::cout << nlohmann::json{{"step", record.step},
                                {"loss", record.loss},
                                {"learning_rate", record.learning_rate},
                                {"gradient_norm", record.gradient_norm},
                                {"tokens_per_s", record.tokens_per_s},
                                {"step_time_s", record.step_time_s},
                                {"peak_device_bytes", record.peak_device_bytes}}
                     .dump()
              << std::endl;
    return;
  }
  fmt::print(
      "step {:>{}}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tokens/s | {:.1f} "
      "ms{}\n",
      record.step, fmt::formatted_size("{}", steps), steps, record.loss, record.learning_rate,
      record.gradient_norm, record.tokens_per_s, record.step_time_s * 1e3,
      record.peak_device_bytes > 0
          ? fmt::format(" | peak {:.2f} GiB",
                        static_cast<double>(record.peak_device_bytes) / (1u << 30))
          : std::string());
  std::fflush(stdout);
}

void print_summary(const executor::TrainingSummary& summary, LogFormat format) {
  if (format == LogFormat::json) {
    nlohmann::json line{{"summary", true},
                        {"first_step", summary.first_step},
                        {"steps_run", summary.steps_run},
                        {"final_loss", summary.final_loss},
                        {"mean_tokens_per_s", summary.mean_tokens_per_s},
                        {"total_time_s", summary.total_time_s}};
    if (summary.last_checkpoint) line["checkpoint"] = summary.last_checkpoint->string();
    std::cout << line.dump() << std::endl;
    return;
  }
  fmt::print("trained steps {}..{} in {:.1f} s: final loss {:.4f}, {:.0f} tokens/s{}\n",
             summary.first_step + 1, summary.first_step + summary.steps_run, summary.total_time_s,
             summary.final_loss, summary.mean_tokens_per_s,
             summary.last_checkpoint
                 ? fmt::format(", checkpoint {}", summary.last_checkpoint->string())
                 : std::string());
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainOptions& options) {
  CLI::App* command = app.add_subcommand(
      "train", "Train a model with a plan on a token file, on the CPU or one GPU");
  CLI::Option* plan = command->add_option(
      "--plan", options.plan, "Plan file to run (a 1x1x1 mesh; fp32, or bf16 on a GPU)");
  command
      ->add_option("--model", options.model, "Model preset or file, trained with the plan it makes")
      ->excludes(plan);
  command
      ->add_option("--micro-batch", options.micro_batch, "Sequences per micro-batch (with --model)")
      ->check(whole_number_from(1, schemas::kMaxGlobalBatchSize))
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
  command->add_option("--data", options.data, "Token file (llm.c format; see strata data)")
      ->required();
  command->add_option("--steps", options.steps, "Optimizer steps in total (a resumed run included)")
      ->check(whole_number_from(1, kMaxTrainingSteps));
  command->add_option("--seed", options.seed, "Seed of init, data order and dropout (default 1234)")
      ->check(seed_value());
  command->add_option("--lr", options.learning_rate, "Peak learning rate")
      ->check(number_from(0, kMaxLearningRate, true));
  command
      ->add_option("--min-lr-fraction", options.min_lr_fraction,
                   "Cosine floor as a fraction of the peak")
      ->check(number_from(0.0, 1.0));
  command->add_option("--warmup-steps", options.warmup_steps, "Linear warm-up steps")
      ->check(whole_number_from(0, kMaxTrainingSteps));
  command->add_option("--weight-decay", options.weight_decay, "AdamW weight decay of matrices")
      ->check(number_from(0, kMaxWeightDecay));
  command->add_option("--grad-clip", options.grad_clip, "Global gradient-norm limit (0: none)")
      ->check(number_from(0, kMaxGradientNorm));
  command->add_option("--checkpoint-dir", options.checkpoint_dir, "Directory for checkpoints");
  command
      ->add_option("--checkpoint-every", options.checkpoint_every,
                   "Checkpoint every K steps (and after the last)")
      ->check(whole_number_from(0, kMaxTrainingSteps));
  command->add_flag("--resume", options.resume,
                    "Continue from the newest checkpoint in --checkpoint-dir");
  command->add_flag("--resume-with-changes", options.resume_with_changes,
                    "With --resume: continue although the global batch, sequence length, "
                    "precision or data file differs from the checkpoint's run");
  command->add_option("--init-llmc", options.init_llmc, "Start from an llm.c GPT-2 model file");
  command->add_option("--save-llmc", options.save_llmc, "Write the trained model as an llm.c file");
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
                   "GPU cluster preset whose one GPU a --model plan on cuda is made for (default "
                   "dgx-h100)")
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

int run_train(const TrainOptions& options) {
  std::string plan_source = "command line";
  schemas::Plan plan;
  executor::Device device = options.device ? parse_device(*options.device) : executor::Device::cpu;
  if (options.plan) {
    plan = schemas::load_plan_file(*options.plan);
    plan_source = *options.plan;
    if (!options.device && plan.cluster.gpu.name != kCpuDeviceName) {
      device = executor::Device::cuda;  // the plan is for a GPU cluster
    }
  } else {
    if (options.cluster && device != executor::Device::cuda) {
      throw schemas::InputError("--cluster", "", "names the GPU cluster of a --device cuda run");
    }
    if (options.precision == std::string("bf16") && device != executor::Device::cuda) {
      throw schemas::InputError("--precision", "", "bf16 trains on a GPU: add --device cuda");
    }
    plan = single_device_plan(options, device);
    if (options.write_plan) {
      schemas::write_json_document(*options.write_plan, schemas::plan_to_json(plan));
    }
  }
  executor::check_plan_runs_on_one_device(plan, plan_source, device);
  const executor::TokenFile data = executor::read_token_file(options.data);

  executor::TrainingOptions training;
  training.steps = options.steps;
  training.seed = options.seed.value_or(1234);
  training.learning_rate = options.learning_rate;
  training.min_learning_rate_fraction = options.min_lr_fraction;
  training.warmup_steps = options.warmup_steps;
  training.adamw.weight_decay = options.weight_decay;
  training.max_gradient_norm = options.grad_clip;
  if (options.checkpoint_dir) training.checkpoint_dir = *options.checkpoint_dir;
  training.checkpoint_every = options.checkpoint_every;
  training.resume = options.resume;
  training.resume_with_changes = options.resume_with_changes;
  if (options.init_llmc) training.init_llmc = *options.init_llmc;
  training.device = device;

  executor::Trainer trainer(plan, plan_source, data, training);
  if (options.resume && options.seed && *options.seed != trainer.seed()) {
    // Data order and dropout follow the checkpoint's seed; another would not continue the run.
    throw schemas::InputError("--seed", "",
                              fmt::format("{} differs from the checkpoint's seed {}; a resumed run "
                                          "keeps its seed",
                                          *options.seed, trainer.seed()));
  }
  if (trainer.completed_steps() > options.steps) {
    throw schemas::InputError(
        "--steps", "",
        fmt::format("{} is below the checkpoint's step {}: nothing to train (--steps counts "
                    "the steps of the whole run)",
                    options.steps, trainer.completed_steps()));
  }
  if (trainer.completed_steps() == options.steps) {
    // A finished run started again: say so, leave the checkpoint alone.
    if (options.log_format == LogFormat::json) {
      std::cout << nlohmann::json{{"summary", true},
                                  {"first_step", trainer.completed_steps()},
                                  {"steps_run", 0},
                                  {"message", "nothing to train"}}
                       .dump()
                << std::endl;
    } else {
      fmt::print("nothing to train: the checkpoint is at step {}, and --steps is {}\n",
                 trainer.completed_steps(), options.steps);
    }
    return 0;
  }
  for (const std::string& change : trainer.resume_changes()) {
    if (options.log_format == LogFormat::text) fmt::print("resuming with a change: {}\n", change);
  }
  const executor::TrainingSummary summary = trainer.run([&](const executor::StepRecord& record) {
    print_step(record, options.steps, options.log_format);
  });
  print_summary(summary, options.log_format);
  if (options.save_llmc) {
    executor::write_llmc_checkpoint(*options.save_llmc, plan.model, trainer.model().parameters());
  }
  if (!std::isfinite(summary.final_loss)) {
    std::fprintf(stderr, "strata: training diverged: the loss is %f\n", summary.final_loss);
    return 1;
  }
  return 0;
}

}  // namespace strata::tools
