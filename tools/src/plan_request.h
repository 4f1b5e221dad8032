// What `strata plan` searches for, from its options: the sequence length (the model's, at most
// 8,192 for pre-training, unless given), the precision (the cluster GPU's default unless given),
// the framework and schedules. Shared by the command and the Python module, so that both search
// the same space.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/planner/plan_search.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/model_config.h"

namespace strata::tools {

// The bounds of a request's numbers, read by the command line's validators and checked again
// here for the Python module, whose arguments no validator sees.
inline constexpr std::int64_t kMaxTopPlans = 100;
inline constexpr double kMaxMemoryReserve = 0.9;
// Throws schemas::InputError naming `flag`, in the validator's words, when `value` is not from
// `minimum` to `maximum`. (The Python module names its keyword arguments instead: seq_len.)
void require_whole_number(std::int64_t value, std::int64_t minimum, std::int64_t maximum,
                          std::string_view flag);

// What a caller asks for, by name (the command's options, the module's arguments).
struct PlanRequest {
  std::int64_t global_batch = 256;
  std::optional<std::int64_t> seq_length;
  std::size_t top_k = 5;
  double memory_reserve = 0;
  std::optional<std::int64_t> max_tp;
  std::vector<std::string> schedules;         // names; empty: the planner's
  std::optional<std::string> precision;       // absent: the cluster GPU's default
  std::optional<std::string> gradient_dtype;  // absent: the precision's default
  std::string framework = "strata";
  bool all_variants = false;
};

// The search's options for `model` on `cluster`; a number outside its bounds, a sequence longer
// than the model's, or a name that is not a precision, framework or schedule, throws
// schemas::InputError naming the flag. `precision_note`
// receives why the precision is not bf16 when it was chosen by default (else empty).
// --strategies K: at most this many strategies, from a search this deep (the fastest plans often
// share a mesh, so K distinct meshes need a deeper list than K), described in the plan set so.
inline constexpr std::int64_t kMaxStrategies = 16;
std::size_t strategy_search_depth(std::size_t top_k, std::size_t count);
std::string strategies_description(const schemas::ModelConfig& model,
                                   const schemas::ClusterConfig& cluster,
                                   const planner::SearchOptions& search, std::size_t count);

planner::SearchOptions plan_search_options(const PlanRequest& options,
                                           const schemas::ModelConfig& model,
                                           const schemas::ClusterConfig& cluster,
                                           std::string& precision_note);

}  // namespace strata::tools
