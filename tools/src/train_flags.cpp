// The flags of `strata train` (docs/commands.md lists them), in groups as --help shows them.
#include <CLI/CLI.hpp>
#include <cstdint>

#include "cli_checks.h"
#include "commands.h"
#include "stall_timeout_option.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_set.h"

namespace strata::tools {
namespace {

// Bounds of the training flags (docs/commands.md, "Limits"): finite, far above any real run.
using schemas::kMaxTrainingSteps;
constexpr double kMaxLearningRate = 1e3;
constexpr double kMaxWeightDecay = 1e3;
constexpr double kMaxGradientNorm = 1e30;

// The plan: a file, or a --model plan's batch and layout. Returns --plan, which the --model
// flags exclude.
CLI::Option* add_plan_flags(CLI::App* command, TrainOptions& options) {
  CLI::Option* plan = command->add_option(
      "--plan,--plan-set", options.plan,
      "Plan file to run (fp32 on the CPU, any tp/sp/cp/dp/pp/ZeRO layout and schedule, one rank "
      "per mesh position under mpirun; fp32 or bf16 on one GPU), or a plan set: its phases, "
      "switching layout in memory where one ends");
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
  command
      ->add_option("--switch", options.switches,
                   "STEP:PLAN[,STEP:PLAN...]: after STEP steps, continue under the plan file PLAN "
                   "(the same model on the same ranks), the state moved between the layouts in "
                   "memory")
      ->delimiter(',');
  command->add_option("--write-plan", options.write_plan, "Write the plan --model makes to FILE")
      ->excludes(plan);
  command->add_option("--tp", options.tp, "Tensor-parallel size of a --model plan")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
      ->excludes(plan);
  command
      ->add_option("--cp", options.cp,
                   "Context-parallel size of a --model plan: each sequence in 2·cp chunks, "
                   "attention around a ring")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
      ->excludes(plan);
  command
      ->add_option("--cp-comm", options.cp_comm,
                   "How cp attention of a --model plan meets the other ranks' keys and values: "
                   "ring (passed around, overlapped; default) or all_gather (gathered once)")
      ->check(CLI::IsMember({"ring", "all_gather"}))
      ->excludes(plan);
  command
      ->add_option("--dp", options.dp,
                   "Data-parallel size of a --model plan (default: the job's ranks / (tp·cp·pp))")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
      ->excludes(plan);
  command
      ->add_option("--ep", options.ep,
                   "Expert-parallel size of a --model plan of a mixture-of-experts model: its "
                   "routed experts split over ep ranks of the tensor-, context- and data-parallel "
                   "group, tokens sent to their experts' rank")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
      ->excludes(plan);
  command
      ->add_option("--etp", options.etp,
                   "Expert-tensor-parallel size of a --model plan of a mixture-of-experts model: "
                   "each routed expert's width split over etp ranks holding the same experts")
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
      ->add_option("--dp-shard", options.dp_shard,
                   "Hybrid sharding of a --model plan: ZeRO shards over groups of N dp ranks "
                   "(× cp), replicated across the groups (default: all of dp)")
      ->check(whole_number_from(1, schemas::kMaxMeshAxisSize))
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
  return plan;
}

// The data, the steps and what the log says of them.
void add_data_flags(CLI::App* command, TrainOptions& options) {
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
}

// The learning-rate schedule and AdamW.
void add_optimizer_flags(CLI::App* command, TrainOptions& options) {
  // The optimizer's settings show their defaults in --help (and in docs/training-one-device.md).
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
}

// Checkpoints, resuming, and the run-safety checks.
void add_checkpoint_flags(CLI::App* command, TrainOptions& options) {
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
}

// llm.c model files in and out, and validation.
void add_evaluation_flags(CLI::App* command, TrainOptions& options) {
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
}

// The device, precision and cluster of a --model plan, and the log's format.
void add_device_flags(CLI::App* command, TrainOptions& options, CLI::Option* plan) {
  command
      ->add_option("--device", options.device,
                   "cpu or cuda (default: cuda when the plan's cluster is a GPU one, cpu for "
                   "cpu-local and --model)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->option_text("cpu|cuda");
  command
      ->add_option("--collectives", options.collectives,
                   "What carries device tensors between cuda ranks: auto (NCCL where the job has "
                   "several ranks, each with its own GPU; else MPI through host memory), nccl, or "
                   "mpi")
      ->check(CLI::IsMember(choices_of(executor::kGpuCollectivesNames)))
      ->option_text("auto|nccl|mpi");
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
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainOptions& options) {
  CLI::App* command = app.add_subcommand(
      "train",
      "Train a model with a plan on a token file: on the CPU or one GPU, or under mpirun with "
      "the plan's tensor, sequence, data and pipeline parallelism and ZeRO");
  CLI::Option* plan = add_plan_flags(command, options);
  add_data_flags(command, options);
  add_optimizer_flags(command, options);
  add_checkpoint_flags(command, options);
  add_evaluation_flags(command, options);
  add_device_flags(command, options, plan);
  return command;
}

}  // namespace strata::tools
