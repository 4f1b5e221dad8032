#include "strata/executor/train/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

#include "strata/executor/checkpoint/checkpoint_directory.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/layout_transfer.h"
#include "strata/executor/checkpoint/llmc_checkpoint.h"
#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/distributed/device_routed_communicator.h"
#include "strata/executor/distributed/nccl_communicator.h"
#include "strata/executor/distributed/stall_watchdog.h"
#include "strata/executor/distributed/typed_collectives.h"
#include "strata/executor/train/resident_memory.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/layout/state_layout.h"
#include "strata/schedule/plan_schedule.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_rules.h"

namespace strata::executor {

using schemas::InputError;

ScalarType compute_type_of(const schemas::Plan& plan) {
  return plan.precision == schemas::Dtype::bf16 ? ScalarType::bfloat16 : ScalarType::float32;
}

void check_plan_runs(const schemas::Plan& plan, const std::string& plan_source, Device device,
                     std::int64_t world_size) {
  const schemas::Mesh& mesh = plan.mesh;
  if (std::optional<schemas::ExecutorRefusal> refusal = schemas::executor_refusal(plan)) {
    throw InputError(plan_source, refusal->json_path, std::move(refusal->rule));
  }
  const bool cuda = device == Device::cuda;
  if (cuda && mesh.cp > 1) {
    // Ring and all-gather attention, and rotary positions that start mid-sequence, have CPU
    // kernels only; data, tensor (with sequence) and pipeline parallelism need none of them.
    throw InputError(plan_source, "/mesh/cp",
                     fmt::format("cp {}: the CUDA backend runs data, tensor and pipeline "
                                 "parallelism (ranks may share a GPU); context parallelism runs "
                                 "on the CPU (--device cpu)",
                                 mesh.cp));
  }
  if (world_size != mesh.world_size()) {
    throw InputError(plan_source, "/mesh",
                     fmt::format("the plan runs on {} ranks (tp {} × cp {} × dp {} × pp {}); this "
                                 "job has {}{}",
                                 mesh.world_size(), mesh.tp, mesh.cp, mesh.dp, mesh.pp, world_size,
                                 world_size == 1 ? " (start it with mpirun -np N)" : ""));
  }
  if (!cuda && plan.precision != schemas::Dtype::fp32) {
    throw InputError(plan_source, "/precision",
                     fmt::format("the CPU backend trains in fp32, the plan says {} (bf16 runs "
                                 "on CUDA)",
                                 schemas::name_of(plan.precision, schemas::kDtypeNames)));
  }
  if (cuda) {
    if (std::optional<schemas::ExecutorRefusal> refusal = cuda_model_refusal(plan.model)) {
      throw InputError(plan_source, "/model" + refusal->json_path, std::move(refusal->rule));
    }
  }
  if (cuda && plan.model.moe) {
    throw InputError(plan_source, "/model/moe",
                     "the CUDA backend builds dense MLPs; mixture-of-experts models train on the "
                     "CPU (--device cpu)");
  }
  if (cuda && plan.zero_stage > 0) {
    // The sharded optimizer keeps ZeRO's shards in host memory; a GPU rank keeps whole optimizer
    // state beside its model (stage 0), which its data-parallel peers reduce into.
    throw InputError(plan_source, "/zero_stage",
                     fmt::format("{}: the executor keeps ZeRO's shards in host memory, and a CUDA "
                                 "run keeps whole optimizer state on its GPU: set it to 0",
                                 plan.zero_stage));
  }
  if (cuda) {
    std::string why_not;
    if (!cuda_device_info(&why_not)) {
      throw InputError("--device", "", fmt::format("cuda: no GPU to train on ({})", why_not));
    }
  }
  // Refused before allocating: fp32 values, gradients and both AdamW moments, 16 bytes a parameter
  // (in host memory; a GPU run stages its initial values and its checkpoints through it), for
  // one tensor-parallel rank's share.
  std::int64_t parameters = 0;
  for (const ParameterSpec& spec : transformer_parameters(plan.model)) {
    parameters += shape_numel(spec.shape);
  }
  const double state_bytes =
      16.0 * static_cast<double>(parameters) / static_cast<double>(mesh.tp * mesh.pp);
  const double physical_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                                static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (state_bytes > physical_bytes) {
    throw InputError(
        plan_source, "/model",
        fmt::format("{}'s {} parameters need {:.1f} GB for fp32 values, gradients and "
                    "AdamW moments{}; this machine has {:.1f} GB",
                    plan.model.name, parameters, state_bytes / 1e9,
                    mesh.tp * mesh.pp > 1
                        ? fmt::format(" on each of {} tensor- and pipeline-parallel ranks",
                                      mesh.tp * mesh.pp)
                        : "",
                    physical_bytes / 1e9));
  }
}

namespace {

// Whether a checkpoint or an llm.c file fills every parameter value right after construction.
bool values_are_loaded(const TrainingOptions& options) {
  return options.init_llmc.has_value() || options.resume;
}

// The model a rank builds: its tp slice, which buffers ZeRO takes over, which layers recompute,
// whether it draws its initial values (not where a checkpoint, an llm.c file or another layout's
// state fills them right after).
TransformerOptions model_options(const schemas::Plan& plan, ProcessGroups& groups,
                                 bool fresh_values) {
  TransformerOptions options;
  options.initialize_values = fresh_values;
  options.tensor_parallel.group = &groups.tensor_parallel();
  options.context_parallel.group = &groups.context_parallel();
  options.context_parallel.comm = plan.cp_comm;
  if (plan.model.moe) {
    options.expert_parallel.group = &groups.expert_parallel();
    options.expert_parallel.width_group = &groups.expert_tensor_parallel();
  }
  options.tensor_parallel.sequence_parallel = plan.sequence_parallel;
  options.tensor_parallel.replicas = [&groups](std::int64_t replicas) -> Communicator& {
    return groups.tensor_parallel_replicas(replicas);
  };
  options.own_values = plan.zero_stage < 3;
  options.own_gradients = plan.zero_stage < 2;
  // Full recomputation: all layers, or each stage's first N (Megatron's block method).
  // Selective recomputation needs nothing more: our attention never stores the probabilities.
  if (plan.recompute.granularity == schemas::RecomputeGranularity::full) {
    options.recomputed_layers.assign(static_cast<std::size_t>(plan.model.num_layers), false);
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      const schemas::PipelineStage& stage = plan.stages[s];
      const std::int64_t count = plan.recompute.full_layers_per_stage.empty()
                                     ? stage.num_layers
                                     : plan.recompute.full_layers_per_stage[s];
      for (std::int64_t l = stage.first_layer; l < stage.first_layer + count; ++l) {
        options.recomputed_layers[static_cast<std::size_t>(l)] = true;
      }
    }
  }
  // This rank's pipeline stages: stage s lives on pipeline rank s mod pp as its chunk s / pp
  // (without a pipeline, the one stage that holds the whole model).
  const std::int64_t pp_rank = groups.coordinate(schemas::MeshAxis::pp);
  for (std::size_t s = static_cast<std::size_t>(pp_rank); s < plan.stages.size();
       s += static_cast<std::size_t>(plan.mesh.pp)) {
    options.stages.push_back(plan.stages[s]);
  }
  return options;
}

std::unique_ptr<ProcessGroups> groups_for(const schemas::Plan& plan, const std::string& plan_source,
                                          Device device, Communicator& world) {
  check_plan_runs(plan, plan_source, device, world.size());
  return std::make_unique<ProcessGroups>(world, plan.mesh);
}

// A CUDA job's NCCL world (null elsewhere), made once the first plan is known to run: its
// errors come before NCCL starts. A job of one needs none (its groups have one rank) unless
// asked for it.
std::unique_ptr<Communicator> nccl_world_for(const schemas::Plan& plan,
                                             const std::string& plan_source,
                                             const TrainingOptions& options, Communicator& world) {
  if (options.device != Device::cuda && options.gpu_collectives == GpuCollectives::nccl) {
    throw InputError("--collectives", "", "nccl carries device tensors: add --device cuda");
  }
  if (options.device != Device::cuda || options.gpu_collectives == GpuCollectives::mpi) {
    return nullptr;
  }
  check_plan_runs(plan, plan_source, options.device, world.size());
  if (options.gpu_collectives == GpuCollectives::automatic) {
    return world.size() > 1 ? nccl_world_if_each_rank_has_a_gpu(world) : nullptr;
  }
  if (!kNcclBackendBuilt) {
    throw InputError("--collectives", "",
                     "nccl: this build has no NCCL (it was not found beside "
                     "the CUDA toolkit when the build was configured)");
  }
  if (!every_rank_has_its_own_gpu(world)) {
    throw InputError("--collectives", "",
                     "nccl: ranks of this job share a GPU, which NCCL refuses: use mpi or auto");
  }
  return device_routed_communicator(world);
}

// The switch in force when a resumed run's latest checkpoint was written: the last one before that
// step (a checkpoint of step S is written before a switch at S); null when the run starts in its
// first plan. The run resumes in that plan's layout, and its checkpoint is checked against that
// plan's batch and sequence length, not the first plan's.
const PlanSwitch* switch_in_force_at_resume(const TrainingOptions& options) {
  if (!options.resume || !options.checkpoint_dir || options.switches.empty()) return nullptr;
  const std::vector<std::pair<std::int64_t, std::filesystem::path>> found =
      checkpoints_in(*options.checkpoint_dir);
  const PlanSwitch* in_force = nullptr;
  for (const PlanSwitch& planned : options.switches) {
    if (found.empty() || planned.step >= found.back().first) break;
    in_force = &planned;
  }
  return in_force;
}

}  // namespace

Trainer::Layout::Layout(const schemas::Plan& plan, const std::string& plan_source,
                        const TokenFile& data, const TrainingOptions& options,
                        const std::filesystem::path& plan_directory, bool fresh_values,
                        Communicator& world)
    : plan(plan),
      groups(groups_for(plan, plan_source, options.device, world)),
      model(plan.model, compute_type_of(plan), options.seed, options.device,
            model_options(plan, *groups, fresh_values)),
      optimizer(std::make_unique<ShardedOptimizer>(
          model, *groups,
          ShardingOptions{plan.zero_stage, plan.overlap_grad_reduce,
                          layout::gradient_bucket_elements(plan), fresh_values},
          options.seed)),
      sampler(data, plan.batch.seq_length, plan.model.vocab_size, options.seed, options.data_order,
              plan.batch.global_batch_size),
      runtime(std::make_unique<PipelineRuntime>(
          this->plan, plan_source, schedule::build_plan_schedule(this->plan, plan_directory), model,
          *optimizer, *groups, sampler)) {}

Trainer::Trainer(const schemas::Plan& plan, const std::string& plan_source, const TokenFile& data,
                 TrainingOptions options, Communicator* world)
    : resident_before_model_bytes_(current_resident_bytes()),
      options_(std::move(options)),
      own_world_(world == nullptr ? solo_communicator() : nullptr),
      world_(world != nullptr ? *world : *own_world_),
      nccl_world_(nccl_world_for(plan, plan_source, options_, world_)),
      data_(data),
      starting_switch_(switch_in_force_at_resume(options_)),
      layout_(starting_switch_ == nullptr
                  ? std::make_unique<Layout>(plan, plan_source, data, options_,
                                             options_.plan_directory, !values_are_loaded(options_),
                                             group_world())
                  : std::make_unique<Layout>(
                        starting_switch_->plan, starting_switch_->source, data, options_,
                        starting_switch_->directory.empty() ? options_.plan_directory
                                                            : starting_switch_->directory,
                        /*fresh_values=*/false, group_world())),
      layout_source_(starting_switch_ == nullptr ? plan_source : starting_switch_->source),
      schedule_{options_.learning_rate,
                options_.learning_rate * options_.min_learning_rate_fraction, options_.warmup_steps,
                options_.steps, options_.learning_rate_decay} {
  for (std::size_t i = 1; i < options_.switches.size(); ++i) {
    STRATA_CHECK(options_.switches[i - 1].step < options_.switches[i].step,
                 "layout switches at steps {} and {}: one per step, in step order",
                 options_.switches[i - 1].step, options_.switches[i].step);
  }
  if (options_.checkpoint_dir) {
    // Found out now, not after the first hours of training.
    std::error_code error;
    std::filesystem::create_directories(*options_.checkpoint_dir, error);
    if (error) {
      throw InputError(options_.checkpoint_dir->string(), "", "cannot create: " + error.message());
    }
    if (world_.rank() == 0) {
      // Rank 0 writes state.json: it holds the directory for the job, and decides what a new run
      // does with checkpoints it finds. A refusal here is rank 0's alone; no rank communicates
      // again before the job's phases agree on it.
      checkpoint_lock_ = hold_checkpoint_directory(*options_.checkpoint_dir);
      remove_abandoned_checkpoints(*options_.checkpoint_dir);
      if (!options_.resume) claim_checkpoint_directory();
    }
  }
  run_identity_ =
      RunIdentity{layout_->plan.batch.global_batch_size,
                  layout_->plan.batch.seq_length,
                  std::string(schemas::name_of(layout_->plan.precision, schemas::kDtypeNames)),
                  static_cast<std::int64_t>(data.tokens.size()),
                  data.tokens_crc32(),
                  data.path.string(),
                  schemas::plan_content_hash(layout_->plan.model, layout_->plan.cluster),
                  std::string(schemas::name_of(options_.data_order, kDataOrderNames))};
  state_.seed = options_.seed;
  state_.run_id = new_run_id();  // only rank 0's is written (with state.json)
  if (options_.init_llmc) {
    ParameterStore whole(transformer_parameters(layout_->plan.model), ScalarType::float32);
    read_llmc_parameters(*options_.init_llmc, layout_->plan.model, whole);
    layout_->optimizer->scatter_values(whole);
  }
  if (options_.resume) {
    if (!options_.checkpoint_dir) {
      throw InputError("--resume", "", "needs --checkpoint-dir to resume from");
    }
    const std::optional<std::filesystem::path> latest = latest_checkpoint(*options_.checkpoint_dir);
    if (!latest) {
      throw InputError(options_.checkpoint_dir->string(), "", "--resume: no checkpoint here");
    }
    state_ = read_latest_checkpoint(*latest);
    if (state_.run) check_resumed_run(*state_.run, *latest);
    // A resumed run is the same run: its checkpoints keep the id (one written before ids, a new).
    if (state_.run_id.empty()) state_.run_id = new_run_id();
    layout_->sampler.set_seed(state_.seed);
  }
}

void Trainer::claim_checkpoint_directory() {
  const std::vector<std::pair<std::int64_t, std::filesystem::path>> found =
      checkpoints_in(*options_.checkpoint_dir);
  if (found.empty()) return;
  if (!options_.overwrite_checkpoints) {
    throw InputError(
        options_.checkpoint_dir->string(), "",
        fmt::format("holds {} checkpoint(s) of another run (steps {} to {}): --resume continues "
                    "that run, --overwrite-checkpoints removes them for this one",
                    found.size(), found.front().first, found.back().first));
  }
  for (const auto& [step, path] : found) std::filesystem::remove_all(path);
}

ShardedCheckpointPart Trainer::checkpoint_part() {
  ShardedCheckpointPart part =
      checkpoint_part_of(layout::state_layout_of(layout_->plan), world_.rank());
  part.values = layout_->optimizer->values_state();
  part.moments = layout_->optimizer->moments_state();
  return part;
}

TrainingState Trainer::read_latest_checkpoint(const std::filesystem::path& checkpoint) {
  ShardedCheckpointPart part = checkpoint_part();
  const std::optional<layout::StateLayout> recorded = recorded_checkpoint_layout(checkpoint);
  if (recorded != part.layout) {
    // Another plan's checkpoint: each rank reads its own elements from the files holding them.
    resume_changes_.push_back(fmt::format("layout {} → {} (resharded on load)",
                                          checkpoint_layout_text(recorded),
                                          checkpoint_layout_text(part.layout)));
  }
  const TrainingState state =
      read_sharded_checkpoint(checkpoint, layout_->plan.model, layout_->model.parameters(), part);
  layout_->optimizer->values_written();
  return state;
}

std::filesystem::path Trainer::write_checkpoint_now() {
  const StallContext stall_context(fmt::format("the checkpoint of step {}", state_.step));
  state_.run = run_identity_;
  return write_sharded_checkpoint(*options_.checkpoint_dir, layout_->plan.model,
                                  layout_->model.parameters(), checkpoint_part(), state_, world_);
}

void Trainer::gather_parameters(ParameterStore& whole) { layout_->optimizer->gather_values(whole); }

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
  compare("data order", "--data-order", recorded.data_order, run_identity_.data_order);
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

double Trainer::mean_micro_batch_loss(double loss_sum, std::int64_t micro_batches) {
  // Over every dp rank's micro-batches and every cp rank's share of their tokens (each cp rank's
  // micro-batch loss is the mean over its tokens, an equal share); tp ranks already agree.
  return all_reduce_value(layout_->groups->gradient_reduction(), loss_sum, ReduceOp::sum) /
         (static_cast<double>(micro_batches) *
          static_cast<double>(layout_->plan.mesh.dp * layout_->plan.mesh.cp));
}

StepRecord Trainer::train_step() {
  const StallContext stall_context(fmt::format("step {}", state_.step + 1));
  const bool cuda = options_.device == Device::cuda;
  if (cuda) reset_cuda_peak_memory();
  // A traced step starts on every rank together, so that their timelines line up.
  if (options_.trace_step == state_.step + 1) world_.barrier();
  const auto start = std::chrono::steady_clock::now();
  const double communication_before = communication_seconds();
  const schemas::BatchConfig& batch = layout_->plan.batch;
  const std::int64_t step = state_.step;
  const std::int64_t step_tokens = batch.global_batch_size * batch.seq_length;
  const double rate = schedule_.at(step);
  const bool traced = options_.trace_step == step + 1;
  // The loss sum over this rank's micro-batches (its pipeline's, with one), the gradient norm,
  // and what ran when, if traced.
  const PipelineStepResult result = layout_->runtime->run_step(
      PipelineStep{step, state_.seed, rate, options_.adamw, options_.max_gradient_norm, traced});
  const double loss = mean_micro_batch_loss(result.loss_sum, batch.num_micro_batches);
  state_.step += 1;
  state_.tokens_seen += step_tokens;

  const std::size_t peak_host = cuda ? 0 : peak_resident_bytes();
  // The step is as long as its slowest rank; the memory the largest any rank holds.
  const auto [seconds, largest_peak_host, communication, largest_model_host] = all_reduce_values<4>(
      world_,
      {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
       static_cast<double>(peak_host), communication_seconds() - communication_before,
       static_cast<double>(cuda ? 0
                                : peak_host - std::min(peak_host, resident_before_model_bytes_))},
      ReduceOp::max);
  if (traced) traced_ = gather_executed_actions(result.executed, &world_);
  return StepRecord{state_.step,
                    loss,
                    rate,
                    result.gradient_norm,
                    static_cast<double>(step_tokens) / seconds,
                    seconds,
                    cuda ? cuda_memory_stats().peak_allocated_bytes : 0,
                    static_cast<std::size_t>(largest_peak_host),
                    static_cast<std::size_t>(largest_model_host),
                    communication};
}

void Trainer::set_validation_data(const TokenFile& file) {
  validation_data_ = &file;
  validation_sampler_ = std::make_unique<BatchSampler>(
      file, layout_->plan.batch.seq_length, layout_->plan.model.vocab_size, options_.seed,
      DataOrder::sequential, layout_->plan.batch.global_batch_size);
}

EvaluationRecord Trainer::evaluate() {
  const StallContext stall_context(fmt::format("the evaluation after step {}", state_.step));
  STRATA_CHECK(validation_sampler_ != nullptr, "evaluate() needs set_validation_data()");
  const auto start = std::chrono::steady_clock::now();
  EvaluationRecord record;
  record.step = state_.step;
  // Each batch once: more than the file holds would count its first batches twice.
  record.batches =
      std::min(options_.eval_batches, validation_sampler_->batches_per_epoch().value_or(1));
  double loss_sum = 0;
  for (std::int64_t batch = 0; batch < record.batches; ++batch) {
    loss_sum += layout_->runtime->evaluate(*validation_sampler_, batch);
  }
  record.loss =
      mean_micro_batch_loss(loss_sum, record.batches * layout_->plan.batch.num_micro_batches);
  record.seconds = all_reduce_value(
      world_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      ReduceOp::max);
  return record;
}

SwitchRecord Trainer::switch_to(const schemas::Plan& plan, const std::string& plan_source,
                                const std::filesystem::path& plan_directory) {
  const StallContext stall_context(
      fmt::format("the switch to {} after step {}", plan_source, state_.step));
  const schemas::Plan& current = layout_->plan;
  if (const std::optional<schemas::PlanRefusal> refusal =
          schemas::switch_refusal(current, "the run", plan)) {
    throw InputError(plan_source, refusal->json_path, refusal->rule);
  }
  const auto start = std::chrono::steady_clock::now();
  const bool peak_restarted = options_.device != Device::cuda && reset_peak_resident();
  SwitchRecord record;
  record.step = state_.step;
  record.from = layout_source_;
  record.to = plan_source;
  // Refused before the old layout gives anything up, so that a refusal leaves the run whole.
  check_plan_runs(plan, plan_source, options_.device, world_.size());
  // The old layout keeps only its values and moments: its activations and gradients go before
  // the new layout is built (its groups are collective over the job); then the state moves from
  // the old one's tensors to the new one's, and the old layout goes.
  layout_->runtime.reset();
  layout_->optimizer->release_gradients();
  auto next =
      std::make_unique<Layout>(plan, plan_source, data_, options_,
                               plan_directory.empty() ? options_.plan_directory : plan_directory,
                               /*fresh_values=*/false, group_world());
  const LayoutTransfer transfer(plan.model, layout::state_layout_of(current),
                                layout::state_layout_of(plan), world_.size());
  // The new layout's state is mapped but untouched (zero pages) until the transfer writes it, so
  // each part moves on its own and the old half of the moments goes as soon as it has moved:
  // a rank never holds both layouts' whole state — at most the old values, one layout's moments
  // and one half of the other's, or both values and the new moments.
  std::vector<Tensor> to_values = next->optimizer->values_state();
  std::vector<Tensor> to_moments = next->optimizer->moments_state();
  for (std::size_t half = 0; half < 2; ++half) {
    Tensor from_half = layout_->optimizer->moments_state()[half];
    transfer.run_part(world_, half == 0 ? StatePart::first_moments : StatePart::second_moments,
                      from_half, to_moments[half]);
    layout_->optimizer->release_moments(half);
  }
  transfer.run_part(world_, StatePart::values, layout_->optimizer->values_state()[0], to_values[0]);
  next->optimizer->values_written();
  next->sampler.set_seed(state_.seed);
  layout_ = std::move(next);
  layout_source_ = plan_source;
  if (validation_data_ != nullptr) set_validation_data(*validation_data_);
  // Checkpoints from here on are of the new plan's run.
  run_identity_.global_batch_size = plan.batch.global_batch_size;
  run_identity_.seq_length = plan.batch.seq_length;
  const std::size_t element = scalar_bytes(to_values[0].scalar_type());
  for (std::int64_t rank = 0; rank < world_.size(); ++rank) {
    record.most_sent_elements = std::max(record.most_sent_elements, transfer.sent_elements(rank));
    record.most_received_elements =
        std::max(record.most_received_elements, transfer.received_elements(rank));
  }
  record.most_sent_bytes = static_cast<std::size_t>(record.most_sent_elements) * element;
  record.most_received_bytes = static_cast<std::size_t>(record.most_received_elements) * element;
  const auto [seconds, peak_host] = all_reduce_values<2>(
      world_,
      {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
       static_cast<double>(options_.device == Device::cuda ? 0
                           : peak_restarted                ? peak_resident_since_reset_bytes()
                                                           : peak_resident_bytes())},
      ReduceOp::max);
  record.seconds = seconds;
  record.peak_host_bytes = static_cast<std::size_t>(peak_host);
  // The steps after it measure the new layout's own peak, not the switch's.
  if (peak_restarted) reset_peak_resident();
  return record;
}

TrainingSummary Trainer::run(const std::function<void(const StepRecord&)>& on_step,
                             const std::function<void(const EvaluationRecord&)>& on_evaluation) {
  TrainingSummary summary;
  summary.first_step = state_.step;
  const auto evaluate_now = [&] {
    summary.evaluations.push_back(evaluate());
    if (on_evaluation) on_evaluation(summary.evaluations.back());
  };
  if (validation_sampler_) evaluate_now();  // the model the run starts from
  double token_count = 0;
  // A resumed run started in the plan in force at its checkpoint (switch_in_force_at_resume): the
  // switches before it are behind it.
  auto next_switch =
      std::find_if(options_.switches.begin(), options_.switches.end(),
                   [&](const PlanSwitch& planned) { return planned.step >= state_.step; });
  while (state_.step < options_.steps) {
    if (next_switch != options_.switches.end() && next_switch->step == state_.step) {
      summary.switches.push_back(
          switch_to(next_switch->plan, next_switch->source, next_switch->directory));
      summary.switches.back().predicted_transfer_s = next_switch->predicted_transfer_s;
      ++next_switch;
    }
    const StepRecord record = train_step();
    on_step(record);
    summary.steps_run += 1;
    summary.final_loss = record.loss;
    summary.total_time_s += record.step_time_s;
    token_count += record.tokens_per_s * record.step_time_s;
    // Diverged (every rank sees the same reduced loss): the run stops at its first non-finite
    // loss, before anything of it — an evaluation, a checkpoint of NaN weights — is written.
    if (!std::isfinite(record.loss)) break;
    const bool last = state_.step == options_.steps;
    if (validation_sampler_ &&
        (last || (options_.eval_every > 0 && state_.step % options_.eval_every == 0))) {
      evaluate_now();
    }
    const bool periodic =
        options_.checkpoint_every > 0 && state_.step % options_.checkpoint_every == 0;
    if (options_.checkpoint_dir && (last || periodic)) {
      summary.last_checkpoint = write_checkpoint_now();
    }
  }
  if (options_.steps == 0 && options_.checkpoint_dir) {
    // Zero steps: the initial model, as a checkpoint to start other runs from.
    summary.last_checkpoint = write_checkpoint_now();
  }
  summary.mean_tokens_per_s = summary.total_time_s > 0 ? token_count / summary.total_time_s : 0;
  return summary;
}

}  // namespace strata::executor
