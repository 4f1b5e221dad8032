#include "plan_request.h"

#include <fmt/format.h>

#include <algorithm>

#include "precision_choice.h"
#include "strata/schemas/enum_names.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/training_framework.h"

namespace strata::tools {

void require_whole_number(std::int64_t value, std::int64_t minimum, std::int64_t maximum,
                          std::string_view flag) {
  if (value < minimum || value > maximum) {
    throw schemas::InputError(
        std::string(flag), "",
        fmt::format("{} is not a whole number from {} to {}", value, minimum, maximum));
  }
}

std::size_t strategy_search_depth(std::size_t top_k, std::size_t count) {
  return std::max(top_k, 8 * count);
}

std::string strategies_description(const schemas::ModelConfig& model,
                                   const schemas::ClusterConfig& cluster,
                                   const planner::SearchOptions& search, std::size_t count) {
  const std::int64_t seq = search.seq_length > 0 ? search.seq_length : model.max_seq_length;
  return fmt::format(
      "{} on {} × {}, global batch {} × {} tokens: {} strategies of different meshes by strata "
      "plan --strategies",
      model.name, cluster.world_size(), cluster.gpu.name, search.global_batch_size, seq, count);
}

planner::SearchOptions plan_search_options(const PlanRequest& options,
                                           const schemas::ModelConfig& model,
                                           const schemas::ClusterConfig& cluster,
                                           std::string& precision_note) {
  require_whole_number(options.global_batch, 1, schemas::kMaxGlobalBatchSize, "--global-batch");
  if (options.seq_length) {
    require_whole_number(*options.seq_length, 1, schemas::kMaxSeqLength, "--seq-len");
  }
  require_whole_number(static_cast<std::int64_t>(std::min<std::size_t>(
                           options.top_k, static_cast<std::size_t>(kMaxTopPlans) + 1)),
                       1, kMaxTopPlans, "--top");
  if (options.max_tp) {
    require_whole_number(*options.max_tp, 1, schemas::kMaxMeshAxisSize, "--max-tp");
  }
  if (!(options.memory_reserve >= 0 && options.memory_reserve <= kMaxMemoryReserve)) {
    throw schemas::InputError(
        "--memory-reserve", "",
        fmt::format("{} is not a number from 0 to {}", options.memory_reserve, kMaxMemoryReserve));
  }
  planner::SearchOptions search;
  search.global_batch_size = options.global_batch;
  // Long-context maxima (131,072 for Llama 3.1) are for fine-tuning; pre-training plans default
  // to at most 8,192 tokens.
  search.seq_length =
      options.seq_length.value_or(std::min<std::int64_t>(8192, model.max_seq_length));
  search.top_k = options.top_k;
  search.all_variants = options.all_variants;
  search.memory_reserve_fraction = options.memory_reserve;
  search.max_tp = options.max_tp.value_or(0);
  const PrecisionChoice precision = training_precision(options.precision, cluster);
  search.precision = precision.dtype;
  precision_note = precision.note;
  // The command line checks the names; the Python module's callers are told here.
  const auto named = [](const std::string& name, const auto& table, const char* option) {
    const auto value = schemas::value_of(name, table);
    if (!value) {
      std::string known;
      for (const auto& entry : table)
        known += (known.empty() ? "" : ", ") + std::string(entry.name);
      throw schemas::InputError(option, "", fmt::format("unknown {} (one of {})", name, known));
    }
    return *value;
  };
  search.framework = named(options.framework, schemas::kTrainingFrameworkNames, "--framework");
  search.gradient_dtype = gradient_dtype_named(options.gradient_dtype, search.precision);
  // Strata's executor accumulates in fp32 (schemas/executor_admission.h): every strata plan with
  // other gradients would be refused, so say so rather than rank nothing.
  if (search.gradient_dtype && search.framework == schemas::TrainingFramework::strata &&
      *search.gradient_dtype != schemas::Dtype::fp32) {
    throw schemas::InputError(
        "--gradient-dtype", "",
        fmt::format("{}: Strata's executor accumulates and reduces gradients in fp32; name the "
                    "stack that reduces in {} with --framework",
                    *options.gradient_dtype, *options.gradient_dtype));
  }
  if (!options.schedules.empty()) {
    search.schedules.clear();
    for (const std::string& name : options.schedules) {
      search.schedules.push_back(named(name, schemas::kScheduleTypeNames, "--schedules"));
    }
  }
  const std::int64_t seq = search.seq_length > 0 ? search.seq_length : model.max_seq_length;
  if (seq > model.max_seq_length) {
    throw schemas::InputError("--seq-len", "",
                              fmt::format("{} is more than {}'s max_seq_length={}", seq, model.name,
                                          model.max_seq_length));
  }
  return search;
}

}  // namespace strata::tools
