// What `strata train` logs on rank 0, as text or one JSON object per line: the run's header (notes,
// resume changes, the layout, the gradient buckets beside the simulator's count), each step and
// evaluation beside the simulator's prediction, the summary, and the traced step's comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "strata/executor/data/batch_sampler.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/plan.h"
#include "strata/simulator/plan_simulation.h"
#include "train_trace.h"

namespace strata::tools {

// What the simulator predicts for the plan on the cluster it names, for the log.
struct Prediction {
  double step_time_s = 0;
  double peak_bytes = 0;          // the largest of any rank
  simulator::RankMemory largest;  // that rank's memory, part by part
  // Data-parallel gradient buckets the simulator prices on rank 0 (its pipeline rank's stages);
  // 0 without data parallelism.
  std::size_t rank0_gradient_buckets = 0;
};
Prediction predict(const schemas::Plan& plan, const std::filesystem::path& plan_directory);

// Rank 0's data-parallel gradient buckets, as run and as the simulator priced them.
struct GradientBuckets {
  std::size_t run = 0, predicted = 0;
};

// Said before the first step (text only: the JSON log carries them in its summary).
struct RunHeader {
  const std::vector<std::string>& notes;
  const std::vector<std::string>& resume_changes;
  const schemas::Plan& plan;
  int world_size = 1;
  std::string backend;  // of the world communicator
  std::optional<GradientBuckets> buckets;
};
void print_run_header(const RunHeader& header, LogFormat format);

// Where a step's data came from: its epoch in a sequential order, and with --log-samples the
// offset of every sample of the global batch in the data file.
struct StepData {
  const executor::BatchSampler& sampler;
  std::int64_t global_batch = 0;
  bool log_samples = false;
};

void print_step(const executor::StepRecord& record, std::int64_t steps,
                const Prediction& prediction, const StepData& data, LogFormat format);

void print_evaluation(const executor::EvaluationRecord& record, std::int64_t steps,
                      LogFormat format);

void print_summary(const executor::TrainingSummary& summary,
                   const std::vector<std::string>& resume_changes,
                   const std::vector<std::string>& notes, const executor::TrainingOptions& training,
                   const std::optional<GradientBuckets>& buckets, LogFormat format);

// A finished run started again: its checkpoint is at `completed_steps` = --steps.
void print_nothing_to_train(std::int64_t completed_steps, std::int64_t steps, LogFormat format);

void print_trace(const TrainTrace& trace, const std::string& file, std::int64_t step,
                 LogFormat format);

}  // namespace strata::tools
