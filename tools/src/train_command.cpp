// `strata train`: trains a model with a plan — read from --plan, or made from --model and the
// batch and layout flags (shown with --write-plan) — on a token file, logging each step beside
// the simulator's prediction, and checkpointing as asked. Under mpirun (or srun) each rank runs its
// part of the plan; rank 0 logs. The flags are in train_flags.cpp, the plan's choice in
// train_plan.h, the log in train_log.h; this file runs the job's phases.
//
// A parallel job fails in one of three ways, each ending every rank without a hang: before
// training (bad input: every rank checks its own), the ranks agree on the lowest rank that
// failed, which alone prints its line, and all exit with its status; during training, the
// failing rank prints its line and aborts the job (MPI_Abort).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "failure_report.h"
#include "job_phase.h"
#include "memory_admission.h"
#include "output_check.h"
#include "stall_timeout_option.h"
#include "strata/executor/checkpoint/llmc_checkpoint.h"
#include "strata/executor/distributed/communicator.h"
#include "strata/executor/train/trainer.h"
#include "strata/planner/switch_pricing.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_rules.h"
#include "train_log.h"
#include "train_plan.h"
#include "train_trace.h"

namespace strata::tools {
namespace {

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

// The trainer's settings from the flags.
executor::TrainingOptions training_options_of(const TrainOptions& options,
                                              const TrainPlan& chosen) {
  executor::TrainingOptions training;
  training.eval_every = options.eval_every.value_or(0);
  training.eval_batches = options.eval_batches.value_or(10);
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
  training.device = chosen.device;
  // The flag's check admits only the table's names.
  training.gpu_collectives =
      *schemas::value_of(options.collectives, executor::kGpuCollectivesNames);
  training.plan_directory = chosen.directory.empty() ? "." : chosen.directory;
  if (options.trace) training.trace_step = options.trace_step.value_or(options.steps);
  return training;
}

// The flags that need one another or must agree, checked before anything is read: evaluation
// without validation data, a trace of no step, betas that never forget; and the files written
// after the last step (`logs`: on rank 0), checked now rather than after hours of training.
void check_flag_combinations(const TrainOptions& options, bool logs) {
  if (!options.val_data) {
    for (const auto& [flag, given] : {std::pair{"--eval-every", options.eval_every.has_value()},
                                      {"--eval-batches", options.eval_batches.has_value()}}) {
      if (given) throw schemas::InputError(flag, "", "needs --val-data FILE to evaluate on");
    }
  }
  if (options.trace_step && !options.trace) {
    throw schemas::InputError("--trace-step", "", "needs --trace FILE to write the step to");
  }
  if (options.trace && options.steps == 0) {
    throw schemas::InputError("--trace", "", "--steps 0 runs no step to trace");
  }
  for (const auto& [flag, beta] :
       {std::pair{"--beta1", options.beta1}, {"--beta2", options.beta2}}) {
    // At 1 the moment never forgets and Adam's bias correction divides by zero.
    if (beta >= 1) throw schemas::InputError(flag, "", fmt::format("{} must be below 1", beta));
  }
  if (logs && options.save_llmc) check_output_file(*options.save_llmc, "--save-llmc");
  if (logs && options.trace) check_output_file(*options.trace, "--trace");
  if (options.trace_step && *options.trace_step > options.steps) {
    throw schemas::InputError(
        "--trace-step", "",
        fmt::format("{} is past the run's last step {}", *options.trace_step, options.steps));
  }
}

// --switch's items: each plan file loaded and checked as --plan's is, for the run's model,
// precision and ranks, at steps in increasing order inside the run.
std::vector<executor::PlanSwitch> planned_switches(const TrainOptions& options,
                                                   const TrainPlan& chosen, int world_size) {
  std::vector<executor::PlanSwitch> switches;
  const std::optional<schemas::PlanSet>& set = chosen.plan_set;
  if (set && options.switches.empty()) {
    // The set's phases: a switch where each after the first begins (inside the run).
    for (std::size_t i = 1; i < set->phases.size(); ++i) {
      const schemas::PlanSetPhase& phase = set->phases[i];
      if (phase.first_step >= options.steps) break;
      const std::string source = *options.plan + "#" + phase.plan;
      // Refused before step 1, not when the phase begins.
      executor::check_plan_runs(set->find(phase.plan)->plan, source, chosen.device, world_size);
      switches.push_back({phase.first_step, set->find(phase.plan)->plan, source,
                          chosen.directory.empty() ? "." : chosen.directory});
    }
    return switches;
  }
  for (const std::string& item : options.switches) {
    const std::size_t colon = item.find(':');
    std::int64_t step = -1;
    if (colon != std::string::npos) {
      const std::string number = item.substr(0, colon);
      if (!number.empty() &&
          std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
          number.size() < 12) {
        step = std::stoll(number);
      }
    }
    if (step < 0 || colon + 1 >= item.size()) {
      throw schemas::InputError(
          "--switch", "", fmt::format("{}: expected STEP:PLAN (steps done, plan file)", item));
    }
    if (step < 1 || step >= options.steps) {
      throw schemas::InputError("--switch", "",
                                fmt::format("{}: step {} is not inside the run (1 to {})", item,
                                            step, options.steps - 1));
    }
    if (!switches.empty() && step <= switches.back().step) {
      throw schemas::InputError(
          "--switch", "",
          fmt::format("{}: steps must increase (after {})", item, switches.back().step));
    }
    // With a plan set, PLAN is one of its ids; otherwise a plan file.
    std::string path = item.substr(colon + 1);
    schemas::Plan plan;
    if (set) {
      const schemas::PlanSetEntry* entry = set->find(path);
      if (entry == nullptr) {
        throw schemas::InputError("--switch", "",
                                  fmt::format("{}: \"{}\" is not a plan of {} ({})", item, path,
                                              *options.plan, set->id_list()));
      }
      plan = entry->plan;
      path = *options.plan + "#" + path;
    } else {
      plan = schemas::load_plan_file(path);
    }
    executor::check_plan_runs(plan, path, chosen.device, world_size);
    if (const std::optional<schemas::PlanRefusal> refusal =
            schemas::switch_refusal(chosen.plan, "the run", plan)) {
      throw schemas::InputError(path, refusal->json_path, refusal->rule);
    }
    const std::filesystem::path directory =
        set ? chosen.directory : std::filesystem::path(path).parent_path();
    switches.push_back({step, std::move(plan), path, directory.empty() ? "." : directory});
  }
  return switches;
}

// Everything phase 1 settles on each rank alone: the plan, the data, the trainer's settings and
// the simulator's prediction.
struct PreparedRun {
  TrainPlan chosen;
  std::optional<executor::TokenFile> data, validation;
  executor::TrainingOptions training;
  Prediction prediction;
  // The simulator's prediction for each --switch plan, in switch order.
  std::vector<Prediction> switch_predictions;
  std::vector<std::string> notes;  // said first in the log, and in the JSON summary
};

PreparedRun prepare_run(const TrainOptions& options, int world_size, bool logs) {
  PreparedRun run;
  run.chosen = train_plan_of(options, world_size, logs);
  executor::check_plan_runs(run.chosen.plan, run.chosen.source, run.chosen.device, world_size);
  if (options.init_llmc) run.notes = llmc_setting_notes(run.chosen.plan.model, *options.init_llmc);
  check_flag_combinations(options, logs);
  run.data = executor::read_token_file(options.data);
  if (options.val_data) run.validation = executor::read_token_file(*options.val_data);
  run.prediction = predict(run.chosen.plan, run.chosen.directory);
  run.training = training_options_of(options, run.chosen);
  run.training.switches = planned_switches(options, run.chosen, world_size);
  const schemas::Plan* previous = &run.chosen.plan;
  for (executor::PlanSwitch& planned : run.training.switches) {
    run.switch_predictions.push_back(predict(planned.plan, planned.directory));
    planned.predicted_transfer_s = planner::predict_switch(*previous, planned.plan).seconds;
    previous = &planned.plan;
  }
  return run;
}

// The flags against the checkpoint a resumed run starts from.
void check_flags_against_checkpoint(const TrainOptions& options, const executor::Trainer& trainer,
                                    const executor::TrainingOptions& training) {
  if (options.resume && options.seed && *options.seed != trainer.seed()) {
    // Data order and dropout follow the checkpoint's seed; another would not continue the run.
    throw schemas::InputError("--seed", "",
                              fmt::format("{} differs from the checkpoint's seed {}; a resumed "
                                          "run keeps its seed",
                                          *options.seed, trainer.seed()));
  }
  if (options.trace && training.trace_step <= trainer.completed_steps() &&
      trainer.completed_steps() < options.steps) {
    throw schemas::InputError("--trace-step", "",
                              fmt::format("step {} was run before the checkpoint this run "
                                          "resumes at step {}",
                                          training.trace_step, trainer.completed_steps()));
  }
  if (trainer.completed_steps() > options.steps) {
    throw schemas::InputError(
        "--steps", "",
        fmt::format("{} is below the checkpoint's step {}: nothing to train (--steps counts "
                    "the steps of the whole run)",
                    options.steps, trainer.completed_steps()));
  }
}

// The prediction for the plan step `step` (1-based) runs under: the first plan's, or that of the
// last switch before it. At a resumed run's completed steps S it is the plan the run resumes in.
const Prediction& prediction_at(const PreparedRun& run, std::int64_t step) {
  const Prediction* current = &run.prediction;
  for (std::size_t i = 0; i < run.training.switches.size(); ++i) {
    if (run.training.switches[i].step < step) current = &run.switch_predictions[i];
  }
  return *current;
}

// Phase 3: the steps, logged on rank 0, then the trace and the llm.c file. Returns the exit status
// (1 when the loss diverged).
int run_steps(const TrainOptions& options, const PreparedRun& run, executor::Trainer& trainer,
              const std::optional<GradientBuckets>& buckets, bool logs) {
  const schemas::Plan& plan = run.chosen.plan;
  const executor::TrainingSummary summary = trainer.run(
      [&](const executor::StepRecord& record) {
        if (logs) {
          print_step(record, options.steps, prediction_at(run, record.step),
                     StepData{trainer.sampler(), trainer.plan().batch.global_batch_size,
                              options.log_samples},
                     options.log_format);
        }
      },
      [&](const executor::EvaluationRecord& record) {
        if (logs) print_evaluation(record, options.steps, options.log_format);
      });
  if (logs) {
    print_summary(summary, trainer.resume_changes(), run.notes, run.training, buckets,
                  options.log_format);
  }
  if (summary.steps_run > 0 && !std::isfinite(summary.final_loss)) {
    // The trainer stopped at this step; nothing of it is written (no trace, no llm.c file).
    if (logs) {
      std::fprintf(stderr,
                   "strata: training diverged: the loss is %s at step %lld; stopped there, "
                   "nothing written after the last checkpoint\n",
                   std::isnan(summary.final_loss) ? "nan" : "infinite",
                   static_cast<long long>(trainer.completed_steps()));
    }
    return 1;
  }
  if (options.trace && logs) {
    // The traced step ran under the plan of the last switch before it.
    const schemas::Plan* traced = &plan;
    std::filesystem::path traced_directory = run.chosen.directory;
    for (const executor::PlanSwitch& planned : run.training.switches) {
      if (planned.step < run.training.trace_step) {
        traced = &planned.plan;
        traced_directory = planned.directory.empty() ? run.chosen.directory : planned.directory;
      }
    }
    print_trace(write_train_trace(*options.trace, *traced, traced_directory,
                                  trainer.traced_actions(), summary.switches),
                *options.trace, run.training.trace_step, options.log_format);
  }
  if (options.save_llmc) {
    // Every rank's slices and shards assembled (on one device: its own values, on the host).
    executor::ParameterStore whole(executor::transformer_parameters(plan.model),
                                   executor::ScalarType::float32);
    trainer.gather_parameters(whole);
    if (logs) executor::write_llmc_checkpoint(*options.save_llmc, plan.model, whole);
  }
  return 0;
}

int train(const TrainOptions& options, executor::Communicator& world) {
  const bool logs = world.rank() == 0;
  // A job of several ranks never waits forever on one that stopped.
  arm_stall_timeout(world, options.stall_timeout_s);
  // Phase 1, on each rank alone: the plan, the checks, the data.
  PreparedRun run;
  run_phase(world, [&] { run = prepare_run(options, world.size(), logs); });
  // Admission: on the CPU the ranks of each host together must fit in what it has (every rank is
  // charged the largest pipeline stage's peak); on a GPU the rank must fit in what its device
  // has free.
  if (options.memory_check) {
    run_phase(world, [&] {
      if (run.chosen.device == executor::Device::cpu) {
        check_host_memory(run.prediction.largest, world);
      } else {
        check_gpu_memory(run.prediction.largest);
      }
    });
  }
  // Phase 2: the trainer — the process groups (collective), then each rank's own model, shards
  // and checkpoint.
  std::unique_ptr<executor::Trainer> trainer;
  run_phase(world, [&] {
    trainer = std::make_unique<executor::Trainer>(run.chosen.plan, run.chosen.source, *run.data,
                                                  run.training, &world);
    if (run.validation) trainer->set_validation_data(*run.validation);
    check_flags_against_checkpoint(options, *trainer, run.training);
  });
  if (trainer->completed_steps() == options.steps && options.steps > 0) {
    // A finished run started again: say so, leave the checkpoint alone.
    if (logs) print_nothing_to_train(trainer->completed_steps(), options.steps, options.log_format);
    return 0;
  }
  // Rank 0's buckets beside the simulator's count of them: the same rule, the plan's size. A
  // resumed run starts in the plan in force at its checkpoint.
  const schemas::Plan& plan = trainer->plan();
  std::optional<GradientBuckets> buckets;
  if (plan.mesh.dp * plan.mesh.cp > 1) {
    buckets =
        GradientBuckets{trainer->bucket_count(),
                        prediction_at(run, trainer->completed_steps()).rank0_gradient_buckets};
  }
  if (logs) {
    print_run_header(RunHeader{run.notes, trainer->resume_changes(), plan, world.size(),
                               trainer->collectives_backend(), buckets},
                     options.log_format);
  }
  // Phase 3: training. A rank that fails now may leave others inside a collective: it says why
  // and ends the job.
  try {
    return run_steps(options, run, *trainer, buckets, logs);
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
