// Trainer: the training loop of `strata train` on one device (the CPU, or one GPU with the CUDA
// backend) — batches from the token file, gradient accumulation over the plan's micro-batches,
// global-norm clipping, AdamW with the learning-rate schedule, checkpoints and resume. Part 2
// runs the same loop per rank.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/executor/checkpoint/checkpoint.h"
#include "strata/executor/data/batch_sampler.h"
#include "strata/executor/model/transformer.h"
#include "strata/executor/optim/adamw.h"
#include "strata/executor/optim/learning_rate_schedule.h"
#include "strata/schemas/plan.h"

namespace strata::executor {

struct TrainingOptions {
  std::int64_t steps = 1;  // total optimizer steps, counted from step 0 (a resumed run included)
  std::uint64_t seed = 1234;
  double learning_rate = 3e-4;
  double min_learning_rate_fraction = 0.1;
  std::int64_t warmup_steps = 0;
  AdamWConfig adamw;
  double max_gradient_norm = 1.0;  // ≤ 0: no clipping
  std::optional<std::filesystem::path> checkpoint_dir;
  std::int64_t checkpoint_every = 0;  // 0: only after the last step
  bool resume = false;
  // Resume although the checkpoint's run differs (another global batch, sequence length,
  // precision or data file): without it such a resume is refused, naming both values.
  bool resume_with_changes = false;
  std::optional<std::filesystem::path> init_llmc;  // start from llm.c weights instead of the seed
  Device device = Device::cpu;
};

struct StepRecord {
  std::int64_t step = 0;  // 1-based: the number of optimizer steps done after this one
  double loss = 0;        // mean token loss over the global batch
  double learning_rate = 0;
  double gradient_norm = 0;  // before clipping
  double tokens_per_s = 0;
  double step_time_s = 0;
  std::size_t peak_device_bytes = 0;  // CUDA: the most device memory tensors held this step
};

struct TrainingSummary {
  std::int64_t first_step = 0;  // steps completed before this run (resume)
  std::int64_t steps_run = 0;
  double final_loss = 0;
  double mean_tokens_per_s = 0;
  double total_time_s = 0;
  std::optional<std::filesystem::path> last_checkpoint;
};

// Checks that the executor can run `plan` as written on `device` (a 1×1×1 mesh; fp32 on the CPU,
// fp32 or bf16 on CUDA; no recomputation; a model it builds; model state that fits the host's
// memory); errors name `plan_source` and the plan's JSON path.
void check_plan_runs_on_one_device(const schemas::Plan& plan, const std::string& plan_source,
                                   Device device);

// The tensor type a plan's precision computes in: float32 for fp32, bfloat16 for bf16.
ScalarType compute_type_of(const schemas::Plan& plan);

class Trainer {
 public:
  Trainer(const schemas::Plan& plan, const std::string& plan_source, const TokenFile& data,
          TrainingOptions options);

  // Runs to options.steps, calling on_step after every optimizer step.
  TrainingSummary run(const std::function<void(const StepRecord&)>& on_step);
  Transformer& model() { return model_; }
  std::int64_t completed_steps() const { return state_.step; }
  // What differs from the checkpoint's run when resumed with resume_with_changes ("global batch
  // 8 → 16", ...); empty otherwise.
  const std::vector<std::string>& resume_changes() const { return resume_changes_; }
  std::uint64_t seed() const { return state_.seed; }

 private:
  StepRecord train_step();
  void check_resumed_run(const RunIdentity& recorded, const std::filesystem::path& checkpoint);

  schemas::Plan plan_;
  TrainingOptions options_;
  Transformer model_;
  BatchSampler sampler_;
  LearningRateSchedule schedule_;
  OptimizerMoments moments_;
  TrainingState state_;
  RunIdentity run_identity_;  // of this run, recorded in its checkpoints
  std::vector<std::string> resume_changes_;
  Tensor inputs_, targets_;                // host: the sampler fills them
  Tensor device_inputs_, device_targets_;  // the model's device (aliases on the CPU)
};

}  // namespace strata::executor
