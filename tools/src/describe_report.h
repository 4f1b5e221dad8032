// What `strata describe` reports about a model, apart from how it is printed: resolved from the
// command's options and as the JSON document its --format json prints. Shared by the command and
// the Python module, so that both answer the same.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "plan_request.h"
#include "strata/costmodels/model_flops.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/model_config.h"

namespace strata::tools {

// One row of the parameter breakdown.
struct Component {
  std::string key;    // JSON name
  std::string label;  // table label
  std::int64_t parameters;
};

// A dense model's rows are its embedding, attention, mlp, norms and head; a mixture of experts
// adds the router, routed experts and shared experts of its MoE layers.
std::vector<Component> components_of(const costmodels::ParameterBreakdown& count);

// The architecture's features in words, in a fixed order: attention kind, positions, norm, MLP
// activation, then the query/key norm, embedding norm and tied embeddings where the model has them.
std::vector<std::string> model_features(const schemas::ModelConfig& model);

// The precisions whose model-state bytes are reported.
// (mxfp8 and nvfp4 keep the same state as fp8: bf16 weights, fp32 gradients and Adam.)
inline constexpr std::array<schemas::Dtype, 4> kReportedPrecisions{
    schemas::Dtype::fp32, schemas::Dtype::fp16, schemas::Dtype::bf16, schemas::Dtype::fp8};

struct DescribedModel {
  schemas::ModelConfig model;
  std::optional<schemas::ClusterConfig> cluster;
  std::string precision;  // as given, e.g. "bf16"
  std::int64_t seq_length = 0;
  costmodels::ParameterBreakdown count;
  costmodels::FlopsPerToken flops;
  std::int64_t state_bytes = 0;  // model states at `precision`
  std::int64_t min_gpus = 0;     // to hold them fully sharded on the cluster (0 without one)
};

// Counts `model` at `seq_length` (absent: its max_seq_length) and, on `cluster`, the GPUs its
// states need at `precision`; bad input throws schemas::InputError naming the flag.
DescribedModel describe_model(schemas::ModelConfig model,
                              std::optional<schemas::ClusterConfig> cluster,
                              const std::string& precision, std::optional<std::int64_t> seq_length);
// The --format json document.
nlohmann::json describe_report(const DescribedModel& described);

}  // namespace strata::tools
