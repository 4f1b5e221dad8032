// Trainer: the training loop of `strata train` — batches from the token file, gradient
// accumulation over the plan's micro-batches, global-norm clipping, AdamW with the learning-rate
// schedule, checkpoints and resume — on one device (the CPU, or one GPU with the CUDA backend) or,
// for a plan of several ranks, as one rank of an MPI job. Every plan runs one program: the plan's
// process groups (of one rank each on one device), its tensor, sequence and data parallelism with
// its ZeRO stage (zero/sharded_optimizer.h), and each step the pipeline runtime executing
// this rank's action list from the plan's schedule (pipeline/pipeline_runtime.h) — the lists the
// simulator times; without a pipeline, a list of one stage.
//
// Every layout computes what one device computes: dp rank d takes the contiguous d-th 1/dp of
// the global batch's samples (sample i of a step is the same window of the data whoever reads it),
// dropout masks and initial values are keyed by global token and element indices, and the loss of
// a step is the mean over all of its tokens.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/executor/checkpoint/checkpoint_directory_lock.h"
#include "strata/executor/checkpoint/checkpoint_state.h"
#include "strata/executor/checkpoint/sharded_checkpoint.h"
#include "strata/executor/data/batch_sampler.h"
#include "strata/executor/distributed/process_groups.h"
#include "strata/executor/model/transformer.h"
#include "strata/executor/optim/adamw.h"
#include "strata/executor/optim/learning_rate_schedule.h"
#include "strata/executor/pipeline/pipeline_runtime.h"
#include "strata/executor/zero/sharded_optimizer.h"
#include "strata/schemas/enum_names.h"
#include "strata/schemas/plan.h"

namespace strata::executor {

// A change of layout during a run: before optimizer step `step` (0-based: after `step` steps),
// the run continues under `plan` — the same model on the same ranks — its state moved in memory
// (Trainer::switch_to).
struct PlanSwitch {
  std::int64_t step = 0;
  schemas::Plan plan;
  std::string source;  // names the plan in errors and logs
  // Where the plan's relative paths (a custom schedule file) are read from; empty: the first
  // plan's (TrainingOptions::plan_directory).
  std::filesystem::path directory;
  // A prediction of the state's transfer time, reported beside the measured switch (< 0: none).
  double predicted_transfer_s = -1;
};

// What carries device tensors between CUDA ranks (TrainingOptions::gpu_collectives).
enum class GpuCollectives { automatic, nccl, mpi };
inline constexpr std::array<schemas::EnumName<GpuCollectives>, 3> kGpuCollectivesNames{
    {{GpuCollectives::automatic, "auto"},
     {GpuCollectives::nccl, "nccl"},
     {GpuCollectives::mpi, "mpi"}}};

struct TrainingOptions {
  std::int64_t steps = 1;  // total optimizer steps, counted from step 0 (a resumed run included)
  std::uint64_t seed = 1234;
  double learning_rate = 3e-4;
  double min_learning_rate_fraction = 0.1;
  std::int64_t warmup_steps = 0;
  LearningRateDecay learning_rate_decay = LearningRateDecay::cosine;
  DataOrder data_order = DataOrder::random;
  AdamWConfig adamw;
  double max_gradient_norm = 1.0;  // ≤ 0: no clipping
  std::optional<std::filesystem::path> checkpoint_dir;
  std::int64_t checkpoint_every = 0;  // 0: only after the last step
  bool resume = false;
  // A new run (no resume) into a directory holding checkpoints removes them first; without it
  // such a run is refused (it would leave the other run's later steps for --resume to pick up).
  bool overwrite_checkpoints = false;
  // Resume although the checkpoint's run differs (another global batch, sequence length,
  // precision or data file): without it such a resume is refused, naming both values.
  bool resume_with_changes = false;
  std::optional<std::filesystem::path> init_llmc;  // start from llm.c weights instead of the seed
  Device device = Device::cpu;
  // What carries device tensors between CUDA ranks: automatic is NCCL where the job has several
  // ranks and each its own GPU, else MPI through host memory; nccl insists (a job of one uses it
  // too); mpi always stages through the host.
  GpuCollectives gpu_collectives = GpuCollectives::automatic;
  // Where the plan's relative paths (a custom schedule file) are read from.
  std::filesystem::path plan_directory = ".";
  // Validation (with set_validation_data): every eval_every steps (0: none in between), before
  // the first step and after the last, the mean token loss over eval_batches global batches of
  // the validation file, read in llm.c's sequential order from its start and without dropout —
  // the same tokens at every evaluation and on every layout.
  std::int64_t eval_every = 0;
  std::int64_t eval_batches = 10;
  // Record every rank's executed actions, with their times, during this step (1-based; 0: none):
  // after it, rank 0 has them in traced_actions().
  std::int64_t trace_step = 0;
  // Layout changes at step boundaries, in step order.
  std::vector<PlanSwitch> switches;
};

// What one switch of layout moved and took.
struct SwitchRecord {
  std::int64_t step = 0;  // optimizer steps done when it ran
  std::string from, to;   // the plans' sources
  // The most elements of state (values and each moment) any rank sent and received, and the
  // bytes they came to; what the slowest rank took, transfer plan and new model included.
  std::int64_t most_sent_elements = 0, most_received_elements = 0;
  std::size_t most_sent_bytes = 0, most_received_bytes = 0;
  double seconds = 0;
  // The largest resident set any rank reached during the switch (where Linux lets the peak be
  // restarted, /proc/self/clear_refs; otherwise the peak so far). Step records after a switch
  // then report the peak since it: the new layout's own.
  std::size_t peak_host_bytes = 0;
  double predicted_transfer_s = -1;  // PlanSwitch's, where the switch was planned as it ran
};

struct StepRecord {
  std::int64_t step = 0;  // 1-based: the number of optimizer steps done after this one
  double loss = 0;        // mean token loss over the global batch
  double learning_rate = 0;
  double gradient_norm = 0;  // before clipping
  double tokens_per_s = 0;
  double step_time_s = 0;             // the slowest rank's
  std::size_t peak_device_bytes = 0;  // CUDA: the most device memory tensors held this step
  std::size_t peak_host_bytes = 0;    // the largest peak resident set of any rank so far
  // The largest growth of any rank's resident set over its size before the model was built: the
  // host memory the model, its optimizer, activations and buffers took (CPU runs).
  std::size_t peak_model_host_bytes = 0;
  double communication_s = 0;  // the longest any rank was blocked in communication this step
};

struct EvaluationRecord {
  std::int64_t step = 0;     // optimizer steps done when it was measured (0: the initial model)
  double loss = 0;           // mean token loss over the validation batches
  std::int64_t batches = 0;  // global batches read (eval_batches, at most the file's)
  double seconds = 0;        // the slowest rank's
};

struct TrainingSummary {
  std::int64_t first_step = 0;  // steps completed before this run (resume)
  std::int64_t steps_run = 0;
  double final_loss = 0;
  double mean_tokens_per_s = 0;
  double total_time_s = 0;
  std::optional<std::filesystem::path> last_checkpoint;
  std::vector<EvaluationRecord> evaluations;  // in step order
  std::vector<SwitchRecord> switches;         // in step order
};

// Checks that the executor can run `plan` as written on `device` with `world_size` ranks: as many
// ranks as the mesh has; tp, sequence, context and data parallelism, ZeRO and pipelines on the
// CPU; one device on CUDA; fp32 on the CPU, fp32 or bf16 on CUDA; a model it builds; model
// state that fits the host's memory. Errors name `plan_source` and the plan's JSON path.
void check_plan_runs(const schemas::Plan& plan, const std::string& plan_source, Device device,
                     std::int64_t world_size);

// The tensor type a plan's precision computes in: float32 for fp32, bfloat16 for bf16.
ScalarType compute_type_of(const schemas::Plan& plan);

class Trainer {
 public:
  // `world` is the job's communicator for a plan of more than one rank (every rank constructs
  // its Trainer together); a one-device plan needs none (it runs over a communicator of one).
  Trainer(const schemas::Plan& plan, const std::string& plan_source, const TokenFile& data,
          TrainingOptions options, Communicator* world = nullptr);

  // Evaluates on `file` as TrainingOptions::eval_every says (every rank gives the same file).
  // Refuses (InputError naming the file) one shorter than a global batch of seq + 1 tokens or
  // holding a token outside the vocabulary.
  void set_validation_data(const TokenFile& file);
  // Runs to options.steps, calling on_step after every optimizer step and on_evaluation after
  // every validation.
  TrainingSummary run(const std::function<void(const StepRecord&)>& on_step,
                      const std::function<void(const EvaluationRecord&)>& on_evaluation = {});
  // The validation loss of the model as it is now (collective in a parallel run).
  EvaluationRecord evaluate();
  // Continues the run under `plan` (the same model on the same ranks; collective): builds the
  // plan's groups, model, optimizer and runtime, and moves the parameters and AdamW moments into
  // them with one all-to-all (checkpoint/layout_transfer.h) — no file, no whole model on any
  // rank, nothing moved between identical placements. The step, seed and data position carry
  // over; the new plan's batch and sequence length apply from the next step. Refuses (naming
  // `plan_source`) a plan another model's, precision's or world size's, or one the executor
  // cannot run.
  SwitchRecord switch_to(const schemas::Plan& plan, const std::string& plan_source,
                         const std::filesystem::path& plan_directory = {});
  const schemas::Plan& plan() const { return layout_->plan; }
  Transformer& model() { return layout_->model; }
  // The whole parameters, assembled from every rank's slices and shards into `whole` (a store
  // of transformer_parameters()); collective over the job in a parallel run.
  void gather_parameters(ParameterStore& whole);
  ProcessGroups& groups() { return *layout_->groups; }
  // What the process groups' collectives run on, for logs: "mpi", "solo", or NCCL's for device
  // tensors beside the MPI world's for the rest.
  std::string collectives_backend() const {
    return nccl_world_ ? nccl_world_->backend() : world_.backend();
  }
  // How many gradient buckets this rank's parameters form (the simulator counts the same).
  std::size_t bucket_count() const { return layout_->optimizer->bucket_count(); }
  std::int64_t completed_steps() const { return state_.step; }
  // What differs from the checkpoint's run: the layout when it was written by another plan
  // (resharded on load), and with resume_with_changes the batch, sequence length, precision or
  // data ("global batch 8 → 16", ...); empty otherwise.
  const std::vector<std::string>& resume_changes() const { return resume_changes_; }
  std::uint64_t seed() const { return state_.seed; }
  // Where each step's samples come from (for logs that name them).
  const BatchSampler& sampler() const { return layout_->sampler; }
  // The actions every rank executed in options.trace_step, by world rank, each timed from the
  // step's start (the ranks start it together, after a barrier): the whole action list. On rank
  // 0, once that step ran.
  const std::vector<std::vector<ExecutedAction>>& traced_actions() const { return traced_; }
  // The action lists this run executes.
  const schedule::PipelineSchedule& pipeline_schedule() const {
    return layout_->runtime->schedule();
  }
  // Per model chunk of this rank, the activation sets its runtime has made so far: what the
  // rank's activation memory is.
  std::vector<std::size_t> pipeline_activation_sets() const {
    return layout_->runtime->activation_sets();
  }

 private:
  // What a plan's layout builds on this rank: its groups, its slice of the model, its optimizer,
  // its sampler and the runtime of its schedule. A switch replaces the whole of it.
  struct Layout {
    Layout(const schemas::Plan& plan, const std::string& plan_source, const TokenFile& data,
           const TrainingOptions& options, const std::filesystem::path& plan_directory,
           bool fresh_values, Communicator& world);
    schemas::Plan plan;
    std::unique_ptr<ProcessGroups> groups;
    Transformer model;
    std::unique_ptr<ShardedOptimizer> optimizer;
    BatchSampler sampler;
    std::unique_ptr<PipelineRuntime> runtime;
  };

  // The communicator the process groups split: nccl_world_ where there is one, else world_.
  Communicator& group_world() { return nccl_world_ ? *nccl_world_ : world_; }
  StepRecord train_step();
  // The mean of the micro-batch losses whose sum on this rank is `loss_sum`, over every dp
  // replica's `micro_batches` (collective over dp).
  double mean_micro_batch_loss(double loss_sum, std::int64_t micro_batches);
  void check_resumed_run(const RunIdentity& recorded, const std::filesystem::path& checkpoint);
  std::filesystem::path write_checkpoint_now();
  // A new run's checkpoint directory: refused if it holds checkpoints, unless
  // overwrite_checkpoints, which removes them (rank 0).
  void claim_checkpoint_directory();
  TrainingState read_latest_checkpoint(const std::filesystem::path& checkpoint);
  ShardedCheckpointPart checkpoint_part();

  // Read first, before any member allocates (see peak_model_host_bytes).
  std::size_t resident_before_model_bytes_;
  TrainingOptions options_;
  std::unique_ptr<Communicator> own_world_;  // a job of one, when no world was given
  Communicator& world_;
  // On CUDA where every rank has its own GPU: world_'s ranks with device-tensor collectives on
  // NCCL (distributed/device_routed_communicator.h), which every layout's process groups split.
  std::unique_ptr<Communicator> nccl_world_;
  const TokenFile& data_;
  // The switch whose plan a resumed run starts in (an element of options_.switches; null: the
  // first plan).
  const PlanSwitch* starting_switch_;
  std::unique_ptr<Layout> layout_;
  std::string layout_source_;                   // the plan layout_ runs, as errors and logs name it
  const TokenFile* validation_data_ = nullptr;  // with set_validation_data
  std::unique_ptr<BatchSampler> validation_sampler_;  // with set_validation_data
  LearningRateSchedule schedule_;
  TrainingState state_;
  RunIdentity run_identity_;  // of this run, recorded in its checkpoints
  // Rank 0's hold on the checkpoint directory while the job runs.
  std::shared_ptr<CheckpointDirectoryLock> checkpoint_lock_;
  std::vector<std::string> resume_changes_;
  std::vector<std::vector<ExecutedAction>> traced_;
};

}  // namespace strata::executor
