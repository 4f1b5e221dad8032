#include "describe_report.h"

#include <fmt/format.h>

#include <cmath>

#include "precision_choice.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/input_error.h"

namespace strata::tools {
namespace {

using schemas::Dtype;

std::string layers_label(std::int64_t layers, std::string_view kind = "") {
  return fmt::format("({} {}layer{})", layers, kind, layers == 1 ? "" : "s");
}

}  // namespace

std::vector<Component> components_of(const costmodels::ParameterBreakdown& count) {
  const std::int64_t dense = count.num_dense_layers();
  const std::int64_t moe = count.num_moe_layers;
  const std::string dense_kind = moe > 0 ? "dense " : "";
  std::vector<Component> components = {
      {"token_embedding", "token embedding", count.token_embedding},
      {"position_embedding", "position embedding", count.position_embedding},
      {"embedding_norm", "embedding norm", count.embedding_norm},
      {"attention", "attention " + layers_label(count.num_layers),
       count.num_layers * count.attention_per_layer},
      {"mlp", "mlp " + layers_label(dense, dense_kind), dense * count.mlp_per_layer},
      {"router", "router " + layers_label(moe, "MoE "), moe * count.router_per_moe_layer},
      {"routed_experts",
       fmt::format("routed experts ({} MoE layers × {})", moe, count.num_routed_experts),
       moe * count.routed_experts_per_moe_layer()},
      {"shared_experts", "shared experts " + layers_label(moe, "MoE "),
       moe * count.shared_experts_per_moe_layer},
      {"layer_norms", "norms " + layers_label(count.num_layers),
       count.num_layers * count.norms_per_layer},
      {"final_norm", "final norm", count.final_norm},
      {"lm_head", "lm head (untied)", count.lm_head},
      {"mtp",
       fmt::format("multi-token prediction ({} module{})", count.num_mtp_modules,
                   count.num_mtp_modules == 1 ? "" : "s"),
       count.mtp()}};
  return components;
}

std::vector<std::string> model_features(const schemas::ModelConfig& model) {
  using schemas::PositionEmbedding;
  std::vector<std::string> features;
  if (model.mla) {
    features.push_back("multi-head latent attention");
  } else if (model.num_kv_heads == model.num_attention_heads) {
    features.push_back("multi-head attention");
  } else if (model.num_kv_heads == 1) {
    features.push_back("multi-query attention");
  } else {
    features.push_back(fmt::format("grouped-query attention ({} kv heads)", model.num_kv_heads));
  }
  switch (model.position_embedding) {
    case PositionEmbedding::learned:
      features.push_back("learned positions");
      break;
    case PositionEmbedding::rope:
      features.push_back(fmt::format("rotary positions (theta {:g})", model.rope_theta.value()));
      break;
    case PositionEmbedding::alibi:
      features.push_back("ALiBi");
      break;
    case PositionEmbedding::none:
      features.push_back("no positions");
      break;
  }
  features.push_back(model.norm == schemas::NormKind::layernorm ? "LayerNorm" : "RMSNorm");
  switch (model.mlp_activation) {
    case schemas::MlpActivation::gelu:
      features.push_back("GELU MLP");
      break;
    case schemas::MlpActivation::swiglu:
      features.push_back("SwiGLU MLP");
      break;
    case schemas::MlpActivation::squared_relu:
      features.push_back("squared-ReLU MLP");
      break;
    case schemas::MlpActivation::clamped_swiglu:
      features.push_back(fmt::format("clamped SwiGLU MLP (limit {:g}, alpha {:g})",
                                     model.swiglu_limit, model.swiglu_alpha));
      break;
  }
  if (model.sliding_window) {
    const schemas::SlidingWindow& window = *model.sliding_window;
    features.push_back(
        window.full_attention_interval == 0
            ? fmt::format("{}-token sliding window on every layer", window.size)
            : fmt::format("{}-token sliding window on {} of {} layers (full attention every {})",
                          window.size, window.windowed_layers(model.num_layers), model.num_layers,
                          window.full_attention_interval));
  }
  if (model.attention_sinks) features.push_back("attention sinks");
  if (model.moe && model.moe->router.logit_bias) features.push_back("router logit bias");
  if (model.qk_norm) features.push_back("query/key norm");
  if (model.embedding_norm) features.push_back("embedding norm");
  if (model.tied_embeddings) features.push_back("tied embeddings");
  if (model.mtp) {
    features.push_back(fmt::format("multi-token prediction: {} module{}, loss weight {}",
                                   model.mtp->num_modules, model.mtp->num_modules == 1 ? "" : "s",
                                   model.mtp->loss_weight));
  }
  return features;
}

DescribedModel describe_model(schemas::ModelConfig model_config,
                              std::optional<schemas::ClusterConfig> cluster,
                              const std::string& precision_name,
                              std::optional<std::int64_t> seq_length) {
  DescribedModel described;
  described.model = std::move(model_config);
  const schemas::ModelConfig& model = described.model;
  described.cluster = std::move(cluster);
  described.precision = precision_name;
  const Dtype precision = precision_named(precision_name);
  if (seq_length) {
    require_whole_number(*seq_length, 1, schemas::kMaxSeqLength, "--seq-len");
  }
  described.seq_length = seq_length.value_or(model.max_seq_length);
  if (described.seq_length > model.max_seq_length) {
    throw schemas::InputError("--seq-len", "",
                              fmt::format("{} is more than {}'s max_seq_length={}",
                                          described.seq_length, model.name, model.max_seq_length));
  }
  described.count = costmodels::count_parameters(model);
  described.flops = costmodels::model_flops_per_token(model, described.seq_length);
  described.state_bytes =
      costmodels::adam_model_state_bytes(precision).total() * described.count.total();
  if (described.cluster) {
    described.min_gpus = static_cast<std::int64_t>(
        std::ceil(static_cast<double>(described.state_bytes) /
                  static_cast<double>(described.cluster->usable_memory_bytes())));
  }
  return described;
}

nlohmann::json describe_report(const DescribedModel& described) {
  const schemas::ModelConfig& model = described.model;
  const costmodels::ParameterBreakdown& count = described.count;
  const std::int64_t parameters = count.total();
  const costmodels::FlopsPerToken& flops = described.flops;
  nlohmann::json report = {
      {"model", model.name},
      {"architecture", schemas::name_of(model.architecture, schemas::kArchitectureNames)},
      {"parameters", parameters},
      {"active_parameters", count.active()},
      {"seq_length", described.seq_length},
      {"flops_per_token",
       {{"forward", flops.forward}, {"backward", flops.backward}, {"training", flops.training()}}}};
  for (const Component& component : components_of(count)) {
    report["parameters_by_component"][component.key] = component.parameters;
  }
  report["features"] = model_features(model);
  if (model.mtp) {
    report["mtp"] = {{"num_modules", model.mtp->num_modules},
                     {"loss_weight", model.mtp->loss_weight},
                     {"parameters", count.mtp()},
                     {"checkpoint_parameters", count.mtp_with_copies()}};
  }
  // Whether strata's executor trains the model (on the CPU; docs/gpus.md lists what CUDA adds).
  if (std::optional<schemas::ExecutorRefusal> refusal = schemas::executor_model_refusal(model)) {
    report["executor"] = {
        {"trains", false}, {"json_path", refusal->json_path}, {"rule", refusal->rule}};
  } else {
    report["executor"] = {{"trains", true}};
  }
  for (Dtype dtype : kReportedPrecisions) {
    const costmodels::ModelStateBytesPerParameter bytes = costmodels::adam_model_state_bytes(dtype);
    const std::int64_t p = parameters;
    report["model_state_bytes"][std::string(schemas::name_of(dtype, schemas::kDtypeNames))] = {
        {"weights", bytes.weights * p},
        {"gradients", bytes.gradients * p},
        {"optimizer", bytes.optimizer * p},
        {"total", bytes.total() * p}};
  }
  if (described.cluster) {
    const schemas::ClusterConfig& cluster = *described.cluster;
    report["cluster"] = {{"name", cluster.name},
                         {"gpus", cluster.world_size()},
                         {"gpu", cluster.gpu.name},
                         {"usable_memory_bytes_per_gpu", cluster.usable_memory_bytes()},
                         {"precision", described.precision},
                         {"model_state_bytes", described.state_bytes},
                         {"min_gpus_for_model_states", described.min_gpus}};
  }
  return report;
}

}  // namespace strata::tools
