#include "train_log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "strata/layout/gradient_buckets.h"

namespace strata::tools {

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

void print_run_header(const RunHeader& header, LogFormat format) {
  if (format != LogFormat::text) return;
  for (const std::string& note : header.notes) fmt::print("{}\n", note);
  for (const std::string& change : header.resume_changes) {
    fmt::print("resuming with a change: {}\n", change);
  }
  const schemas::Plan& plan = header.plan;
  if (header.world_size > 1) {
    fmt::print("{} ranks: tp {}{} × dp {}{}{}, ZeRO-{}, {} over {}\n", header.world_size,
               plan.mesh.tp, plan.mesh.cp > 1 ? fmt::format(" × cp {}", plan.mesh.cp) : "",
               plan.mesh.dp, plan.sequence_parallel ? " with sequence parallelism" : "",
               plan.mesh.pp > 1
                   ? fmt::format(" × pp {}{} ({})", plan.mesh.pp,
                                 plan.mesh.vpp > 1 ? fmt::format(" × vpp {}", plan.mesh.vpp) : "",
                                 schemas::name_of(plan.schedule.type, schemas::kScheduleTypeNames))
                   : std::string(),
               plan.zero_stage, plan.model.name, header.backend);
  }
  if (header.world_size == 1 && header.backend.find("nccl") != std::string::npos) {
    fmt::print("collectives over {}\n", header.backend);  // asked for on one rank
  }
  if (header.buckets) {
    fmt::print("gradient buckets on rank 0: {} at a bucket size of {} parameters (predicted {})\n",
               header.buckets->run, layout::gradient_bucket_elements(plan),
               header.buckets->predicted);
  }
}

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
    for (const executor::SwitchRecord& record : summary.switches) {
      line["switches"].push_back({{"step", record.step},
                                  {"from", record.from},
                                  {"to", record.to},
                                  {"most_sent_bytes", record.most_sent_bytes},
                                  {"most_received_bytes", record.most_received_bytes},
                                  {"seconds", record.seconds},
                                  {"peak_host_bytes", record.peak_host_bytes}});
      if (record.predicted_transfer_s >= 0) {
        line["switches"].back()["predicted_transfer_s"] = record.predicted_transfer_s;
      }
    }
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
  for (const executor::SwitchRecord& record : summary.switches) {
    fmt::print(
        "switched after step {}: {} → {}, at most {:.1f} MB sent and {:.1f} MB received "
        "by a rank, {:.3f} s{}\n",
        record.step, record.from, record.to, record.most_sent_bytes / 1e6,
        record.most_received_bytes / 1e6, record.seconds,
        record.predicted_transfer_s >= 0
            ? fmt::format(" (transfer predicted {:.2f} ms)", 1e3 * record.predicted_transfer_s)
            : std::string());
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

void print_nothing_to_train(std::int64_t completed_steps, std::int64_t steps, LogFormat format) {
  if (format == LogFormat::json) {
    std::cout << nlohmann::json{{"summary", true},
                                {"first_step", completed_steps + 1},
                                {"last_step", completed_steps},
                                {"steps_run", 0},
                                {"message", "nothing to train"}}
                     .dump()
              << std::endl;
  } else {
    fmt::print("nothing to train: the checkpoint is at step {}, and --steps is {}\n",
               completed_steps, steps);
  }
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

}  // namespace strata::tools
