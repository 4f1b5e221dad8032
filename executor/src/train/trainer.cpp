#include "strata/executor/train/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

#include "strata/executor/checkpoint/llmc_checkpoint.h"
#include "strata/executor/cuda/cuda_device.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan.h"

namespace strata::executor {

using schemas::InputError;

ScalarType compute_type_of(const schemas::Plan& plan) {
  return plan.precision == schemas::Dtype::bf16 ? ScalarType::bfloat16 : ScalarType::float32;
}

void check_plan_runs_on_one_device(const schemas::Plan& plan, const std::string& plan_source,
                                   Device device) {
  const schemas::Mesh& mesh = plan.mesh;
  for (const auto& [axis, size] :
       {std::pair{"tp", mesh.tp}, std::pair{"cp", mesh.cp}, std::pair{"dp", mesh.dp},
        std::pair{"pp", mesh.pp}, std::pair{"vpp", mesh.vpp}}) {
    if (size != 1) {
      throw InputError(plan_source, fmt::format("/mesh/{}", axis),
                       fmt::format("{}={}: this executor trains on one device (a 1×1×1 mesh); "
                                   "parallel meshes run with the parallel executor",
                                   axis, size));
    }
  }
  const bool cuda = device == Device::cuda;
  if (plan.precision != schemas::Dtype::fp32 && !(cuda && plan.precision == schemas::Dtype::bf16)) {
    throw InputError(plan_source, "/precision",
                     fmt::format("the {} backend trains in {}, the plan says {}",
                                 cuda ? "CUDA" : "CPU", cuda ? "fp32 or bf16" : "fp32",
                                 schemas::name_of(plan.precision, schemas::kDtypeNames)));
  }
  if (cuda) {
    std::string why_not;
    if (!cuda_device_info(&why_not)) {
      throw InputError("--device", "", fmt::format("cuda: no GPU to train on ({})", why_not));
    }
  }
  if (plan.recompute.granularity != schemas::RecomputeGranularity::none) {
    throw InputError(plan_source, "/recompute",
                     "the one-device executor keeps every activation; use recompute none");
  }
  check_executor_supports(plan.model, plan_source, "/model");
  // Refused before allocating: fp32 values, gradients and both AdamW moments, 16 bytes a parameter
  // (in host memory; a GPU run stages its initial values and its checkpoints through it).
  std::int64_t parameters = 0;
  for (const ParameterSpec& spec : transformer_parameters(plan.model)) {
    parameters += shape_numel(spec.shape);
  }
  const double state_bytes = 16.0 * static_cast<double>(parameters);
  const double physical_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                                static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (state_bytes > physical_bytes) {
    throw InputError(
        plan_source, "/model",
        fmt::format("{}'s {} parameters need {:.1f} GB for fp32 values, gradients and "
                    "AdamW moments; this machine has {:.1f} GB",
                    plan.model.name, parameters, state_bytes / 1e9, physical_bytes / 1e9));
  }
}

Trainer::Trainer(const schemas::Plan& plan, const std::string& plan_source, const TokenFile& data,
                 TrainingOptions options)
    : plan_(plan),
      options_(std::move(options)),
      model_((check_plan_runs_on_one_device(plan, plan_source, options_.device), plan.model),
             compute_type_of(plan), options_.seed, options_.device),
      sampler_(data, plan.batch.seq_length, plan.model.vocab_size, options_.seed),
      schedule_{options_.learning_rate,
                options_.learning_rate * options_.min_learning_rate_fraction, options_.warmup_steps,
                options_.steps} {
  if (options_.checkpoint_dir) {
    // Found out now, not after the first hours of training.
    std::error_code error;
    std::filesystem::create_directories(*options_.checkpoint_dir, error);
    if (error) {
      throw InputError(options_.checkpoint_dir->string(), "", "cannot create: " + error.message());
    }
    remove_abandoned_checkpoints(*options_.checkpoint_dir);
  }
  run_identity_ = RunIdentity{plan_.batch.global_batch_size,
                              plan_.batch.seq_length,
                              std::string(schemas::name_of(plan_.precision, schemas::kDtypeNames)),
                              static_cast<std::int64_t>(data.tokens.size()),
                              data.tokens_crc32(),
                              data.path.string(),
                              schemas::plan_content_hash(plan_.model, plan_.cluster)};
  moments_ = OptimizerMoments::zeros_like(model_.parameters());
  state_.seed = options_.seed;
  if (options_.init_llmc)
    read_llmc_parameters(*options_.init_llmc, plan_.model, model_.parameters());
  if (options_.resume) {
    if (!options_.checkpoint_dir) {
      throw InputError("--resume", "", "needs --checkpoint-dir to resume from");
    }
    const std::optional<std::filesystem::path> latest = latest_checkpoint(*options_.checkpoint_dir);
    if (!latest) {
      throw InputError(options_.checkpoint_dir->string(), "", "--resume: no checkpoint here");
    }
    state_ = read_checkpoint(*latest, plan_.model, model_.parameters(), moments_);
    if (state_.run) check_resumed_run(*state_.run, *latest);
    sampler_.set_seed(state_.seed);
  }
  inputs_ =
      Tensor::zeros({plan_.batch.micro_batch_size, plan_.batch.seq_length}, ScalarType::int32);
  targets_ = Tensor::zeros(inputs_.shape(), ScalarType::int32);
  device_inputs_ = options_.device == Device::cpu ? inputs_ : inputs_.to(options_.device);
  device_targets_ = options_.device == Device::cpu ? targets_ : targets_.to(options_.device);
}

void Trainer::check_resumed_run(const RunIdentity& recorded,
                                const std::filesystem::path& checkpoint) {
  struct Difference {
    const char* what;
    const char* flag;
    std::string recorded, now;
  };
  std::vector<Difference> differences;
  const auto compare = [&](const char* what, const char* flag, const auto& then, const auto& now) {
    if (then != now) {
      differences.push_back(
          Difference{what, flag, fmt::format("{}", then), fmt::format("{}", now)});
    }
  };
  compare("global batch", "--global-batch", recorded.global_batch_size,
          run_identity_.global_batch_size);
  compare("sequence length", "--seq-len", recorded.seq_length, run_identity_.seq_length);
  compare("precision", "--precision", recorded.precision, run_identity_.precision);
  if (recorded.data_crc32 != run_identity_.data_crc32 ||
      recorded.data_tokens != run_identity_.data_tokens) {
    differences.push_back({"data", "--data",
                           fmt::format("{} ({} tokens, CRC-32 {})", recorded.data_file,
                                       recorded.data_tokens, recorded.data_crc32),
                           fmt::format("{} ({} tokens, CRC-32 {})", run_identity_.data_file,
                                       run_identity_.data_tokens, run_identity_.data_crc32)});
  }
  if (differences.empty()) return;
  if (!options_.resume_with_changes) {
    const Difference& first = differences.front();
    throw InputError(first.flag, "",
                     fmt::format("the checkpoint {} was written with {} {}, this run has {}; "
                                 "--resume-with-changes continues it anyway",
                                 checkpoint.string(), first.what, first.recorded, first.now));
  }
  for (const Difference& difference : differences) {
    resume_changes_.push_back(
        fmt::format("{} {} → {}", difference.what, difference.recorded, difference.now));
  }
}

StepRecord Trainer::train_step() {
  const bool cuda = options_.device == Device::cuda;
  if (cuda) reset_cuda_peak_memory();
  const auto start = std::chrono::steady_clock::now();
  const schemas::BatchConfig& batch = plan_.batch;
  const std::int64_t step = state_.step;
  // Each token's loss weighs 1 / (tokens in the global batch): the step's loss is their mean.
  const std::int64_t step_tokens = batch.global_batch_size * batch.seq_length;
  const double loss_scale = 1.0 / static_cast<double>(step_tokens);
  model_.parameters().zero_gradients();
  double loss_sum = 0;
  for (std::int64_t micro = 0; micro < batch.num_micro_batches; ++micro) {
    const std::int64_t first_sample = micro * batch.micro_batch_size;
    sampler_.fill(step, first_sample, inputs_, targets_);
    if (cuda) {
      device_inputs_.copy_from(inputs_);
      device_targets_.copy_from(targets_);
    }
    const DropoutContext dropout{state_.seed, static_cast<std::uint64_t>(step),
                                 first_sample * batch.seq_length};
    loss_sum += model_.forward_backward(device_inputs_, device_targets_, loss_scale, dropout);
  }
  const double rate = schedule_.at(step);
  // On CUDA the norm's read-back waits for the step's last kernel: the time below is the GPU's.
  const double norm = optimizer_step(model_.parameters(), moments_, rate, step, options_.adamw,
                                     options_.max_gradient_norm);
  state_.step += 1;
  state_.tokens_seen += step_tokens;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return StepRecord{state_.step,
                    loss_sum / static_cast<double>(batch.num_micro_batches),
                    rate,
                    norm,
                    static_cast<double>(step_tokens) / seconds,
                    seconds,
                    cuda ? cuda_memory_stats().peak_allocated_bytes : 0};
}

TrainingSummary Trainer::run(const std::function<void(const StepRecord&)>& on_step) {
  TrainingSummary summary;
  summary.first_step = state_.step;
  double token_count = 0;
  while (state_.step < options_.steps) {
    const StepRecord record = train_step();
    on_step(record);
    summary.steps_run += 1;
    summary.final_loss = record.loss;
    summary.total_time_s += record.step_time_s;
    token_count += record.tokens_per_s * record.step_time_s;
    const bool last = state_.step == options_.steps;
    const bool periodic =
        options_.checkpoint_every > 0 && state_.step % options_.checkpoint_every == 0;
    if (options_.checkpoint_dir && (last || periodic)) {
      state_.run = run_identity_;
      summary.last_checkpoint = write_checkpoint(*options_.checkpoint_dir, plan_.model,
                                                 model_.parameters(), moments_, state_);
    }
  }
  summary.mean_tokens_per_s = summary.total_time_s > 0 ? token_count / summary.total_time_s : 0;
  return summary;
}

}  // namespace strata::executor
