// The rules between a plan's fields (validate_plan and the checks it is made of): each throws
// the first refusal as an InputError naming the JSON path and the rule.
#include "strata/schemas/plan_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "strata/schemas/object_reader.h"
#include "strata/schemas/plan.h"

namespace strata::schemas {

// Checks that the stages cover layers 0..L-1 once, in order, and hold the embedding first and
// the LM head last.
void validate_pipeline_stages(const std::vector<PipelineStage>& stage_list, const Mesh& mesh,
                              std::int64_t num_layers, const JsonLocation& stages) {
  const std::int64_t expected_stages = mesh.pp * mesh.vpp;
  if (static_cast<std::int64_t>(stage_list.size()) != expected_stages) {
    stages.fail(fmt::format(
        "{} stage{} for pp × vpp = {} × {} = {}; give one entry per pipeline "
        "rank and virtual chunk, in pipeline order",
        stage_list.size(), stage_list.size() == 1 ? "" : "s", mesh.pp, mesh.vpp, expected_stages));
  }
  std::int64_t next_layer = 0;
  for (std::size_t s = 0; s < stage_list.size(); ++s) {
    const PipelineStage& stage = stage_list[s];
    const JsonLocation where = stages / s;
    const bool first = s == 0;
    const bool last = s + 1 == stage_list.size();
    if (stage.first_layer > next_layer) {
      (where / "first_layer")
          .fail(fmt::format("{} leaves layer{} {} in no stage", stage.first_layer,
                            stage.first_layer - next_layer == 1 ? "" : "s",
                            stage.first_layer - next_layer == 1
                                ? fmt::format("{}", next_layer)
                                : fmt::format("{}..{}", next_layer, stage.first_layer - 1)));
    }
    if (stage.first_layer < next_layer) {
      (where / "first_layer")
          .fail(fmt::format("{} overlaps the previous stage, which ends at layer {}; each layer "
                            "belongs to exactly one stage",
                            stage.first_layer, next_layer - 1));
    }
    next_layer = stage.first_layer + stage.num_layers;
    if (next_layer > num_layers) {
      (where / "num_layers")
          .fail(fmt::format("{} layers from layer {} reach layer {}, but the model has {} layers "
                            "(0..{})",
                            stage.num_layers, stage.first_layer, next_layer - 1, num_layers,
                            num_layers - 1));
    }
    if (stage.embedding != first) {
      (where / "embedding")
          .fail(first ? "the first stage must hold the embedding"
                      : fmt::format("only the first stage holds the embedding, not stage {}", s));
    }
    if (stage.lm_head != last) {
      (where / "lm_head")
          .fail(last ? "the last stage must hold the LM head and loss"
                     : fmt::format("only the last stage holds the LM head, not stage {}", s));
    }
    if (stage.num_layers == 0 && !stage.embedding && !stage.lm_head) {
      (where / "num_layers")
          .fail(
              "0: a stage holds at least one layer, unless it is the embedding-only first stage "
              "or the LM-head-only last stage");
    }
  }
  if (next_layer < num_layers) {
    (stages / (stage_list.size() - 1) / "num_layers")
        .fail(fmt::format("the stages end at layer {} but the model has {} layers: layer{} {} "
                          "{} in no stage",
                          next_layer - 1, num_layers, num_layers - next_layer == 1 ? "" : "s",
                          num_layers - next_layer == 1
                              ? fmt::format("{}", next_layer)
                              : fmt::format("{}..{}", next_layer, num_layers - 1),
                          num_layers - next_layer == 1 ? "is" : "are"));
  }
}

namespace {

void validate_stages(const Plan& plan, const JsonLocation& location) {
  validate_pipeline_stages(plan.stages, plan.mesh, plan.model.num_layers,
                           location / "pipeline" / "stages");
}

// Fails at the first of `values` that repeats an earlier one (a list of names, each once).
template <typename Enum, std::size_t N>
void require_distinct(const std::vector<Enum>& values, const std::array<EnumName<Enum>, N>& table,
                      const JsonLocation& where) {
  for (std::size_t i = 1; i < values.size(); ++i) {
    const auto end = values.begin() + static_cast<long>(i);
    if (std::find(values.begin(), end, values[i]) != end) {
      (where / i).fail(fmt::format("\"{}\" is named twice", name_of(values[i], table)));
    }
  }
}

// The modules a selective plan names: each once, and each a part the model has.
void validate_recompute_modules(const Plan& plan, const JsonLocation& location) {
  const std::vector<RecomputeModule>& modules = plan.recompute.modules;
  if (modules.empty()) return;
  const JsonLocation where = location / "recompute" / "modules";
  if (plan.recompute.granularity != RecomputeGranularity::selective) {
    where.fail(
        fmt::format("only granularity \"selective\" recomputes modules (granularity is "
                    "\"{}\")",
                    name_of(plan.recompute.granularity, kRecomputeGranularityNames)));
  }
  const ModelConfig& model = plan.model;
  const bool has_dense_layer =
      !model.moe || model.moe->num_moe_layers(model.num_layers) < model.num_layers;
  require_distinct(modules, kRecomputeModuleNames, where);
  for (std::size_t i = 0; i < modules.size(); ++i) {
    if (modules[i] == RecomputeModule::moe_act && !model.moe) {
      (where / i).fail(
          "\"moe_act\" recomputes the routed experts' activation: the model has no "
          "moe block");
    }
    if (modules[i] == RecomputeModule::mlp && !has_dense_layer) {
      (where / i).fail(
          "\"mlp\" recomputes the dense layers' MLP: every layer of the model is a "
          "moe layer (use \"moe_act\")");
    }
    if (modules[i] == RecomputeModule::mla_up_proj && !model.mla) {
      (where / i).fail(
          "\"mla_up_proj\" recomputes latent attention's up projections: the model "
          "has no mla block");
    }
  }
}

// CUDA graphs: a stack that captures them, each scope once, parts the model has, and only what
// can be captured (no host synchronisation inside the graph).
void validate_cuda_graph_scope(const Plan& plan, const JsonLocation& location) {
  const std::vector<CudaGraphScope>& scopes = plan.cuda_graph_scope;
  if (scopes.empty()) return;
  const JsonLocation where = location / "cuda_graph_scope";
  if (!captures_cuda_graphs(plan.framework)) {
    where.fail(
        fmt::format("{} does not capture CUDA graph scopes (Megatron-Core does: framework "
                    "megatron-lm or nemo)",
                    name_of(plan.framework, kTrainingFrameworkNames)));
  }
  const auto named = [&](CudaGraphScope scope) {
    return std::find(scopes.begin(), scopes.end(), scope) != scopes.end();
  };
  const ModelConfig& model = plan.model;
  const bool dropless = model.moe && !model.moe->capacity_factor;
  require_distinct(scopes, kCudaGraphScopeNames, where);
  for (std::size_t i = 0; i < scopes.size(); ++i) {
    const CudaGraphScope scope = scopes[i];
    const std::string_view name = name_of(scope, kCudaGraphScopeNames);
    if (scope == CudaGraphScope::full_iteration && scopes.size() > 1) {
      (where / i).fail("\"full_iteration\" holds every other scope: name it alone");
    }
    if (scope == CudaGraphScope::full_iteration && dropless) {
      (where / i).fail(
          "a dropless mixture of experts reads its token counts on the host every "
          "layer, which no whole-iteration graph can hold (set a capacity_factor)");
    }
    const bool moe_part = scope == CudaGraphScope::moe || scope == CudaGraphScope::moe_router ||
                          scope == CudaGraphScope::moe_preprocess;
    if (moe_part && !model.moe) {
      (where / i).fail(
          fmt::format("\"{}\" is part of a MoE layer: the model has no moe block", name));
    }
    if (scope == CudaGraphScope::mlp && model.moe &&
        model.moe->num_moe_layers(model.num_layers) == model.num_layers) {
      (where / i).fail("\"mlp\" is the dense layers' MLP: every layer of the model is a moe layer");
    }
    if (scope == CudaGraphScope::moe && dropless) {
      (where / i).fail(
          "\"moe\" needs static shapes: a dropless block's token counts vary (set a "
          "capacity_factor, or capture moe_router and moe_preprocess)");
    }
    if ((scope == CudaGraphScope::moe_router || scope == CudaGraphScope::moe_preprocess) &&
        named(CudaGraphScope::moe)) {
      (where / i).fail(fmt::format("\"moe\" already holds \"{}\"", name));
    }
  }
}

void validate_recompute(const Plan& plan, const JsonLocation& location) {
  validate_recompute_modules(plan, location);
  const JsonLocation counts = location / "recompute" / "full_layers_per_stage";
  const std::vector<std::int64_t>& per_stage = plan.recompute.full_layers_per_stage;
  if (per_stage.empty()) return;
  if (plan.recompute.granularity != RecomputeGranularity::full) {
    counts.fail(
        fmt::format("only granularity \"full\" recomputes whole layers (granularity is "
                    "\"{}\")",
                    name_of(plan.recompute.granularity, kRecomputeGranularityNames)));
  }
  if (per_stage.size() != plan.stages.size()) {
    counts.fail(fmt::format("{} entries for {} pipeline stages; give one per stage",
                            per_stage.size(), plan.stages.size()));
  }
  for (std::size_t s = 0; s < per_stage.size(); ++s) {
    if (per_stage[s] > plan.stages[s].num_layers) {
      (counts / s)
          .fail(fmt::format("{} is more than stage {}'s {} layers", per_stage[s], s,
                            plan.stages[s].num_layers));
    }
  }
}

}  // namespace

void validate_mesh_for_model(const Mesh& mesh, const ModelConfig& model,
                             const JsonLocation& mesh_location) {
  if (const std::optional<PlanRefusal> refusal = mesh_model_refusal(mesh, model)) {
    // The refusal's path is below the plan ("/mesh/tp"): here, below the mesh object given.
    const std::string below_mesh = refusal->json_path.substr(std::string_view("/mesh").size());
    JsonLocation(mesh_location.source(), mesh_location.pointer() + below_mesh).fail(refusal->rule);
  }
}

namespace {

void validate_mesh(const Plan& plan, const JsonLocation& location) {
  const Mesh& mesh = plan.mesh;
  const JsonLocation where = location / "mesh";
  // Each axis may be up to 2^26, so form the product in 128 bits before comparing.
  const __int128 mesh_size = static_cast<__int128>(mesh.tp) * mesh.cp * mesh.dp * mesh.pp;
  if (mesh_size != plan.cluster.world_size()) {
    where.fail(
        fmt::format("tp × cp × dp × pp = {} × {} × {} × {} = {} does not equal the cluster's "
                    "{} GPUs ({} nodes × {})",
                    mesh.tp, mesh.cp, mesh.dp, mesh.pp, mesh_size, plan.cluster.world_size(),
                    plan.cluster.nodes, plan.cluster.gpus_per_node));
  }
  for (const std::optional<PlanRefusal>& refusal :
       {mesh_model_refusal(mesh, plan.model), dp_shard_refusal(mesh, plan.zero_stage),
        context_parallel_refusal(mesh, plan.batch.seq_length)}) {
    if (refusal) fail_at(location, *refusal);
  }
}

}  // namespace

void validate_plan(const Plan& plan, const JsonLocation& location) {
  validate_mesh(plan, location);
  for (const std::optional<PlanRefusal>& refusal :
       {batch_refusal(plan.batch, plan.mesh, plan.model),
        sequence_parallel_refusal(plan.mesh, plan.model, plan.batch.seq_length,
                                  plan.sequence_parallel)}) {
    if (refusal) fail_at(location, *refusal);
  }
  if (plan.ep_comm_overlap) {
    if (const std::optional<PlanRefusal> refusal = ep_comm_overlap_refusal(plan)) {
      (location / "ep_comm_overlap").fail(refusal->rule);
    }
  }
  validate_cuda_graph_scope(plan, location);
  if (plan.expert_load_imbalance && !plan.model.moe) {
    (location / "expert_load_imbalance").fail("needs a mixture-of-experts model (no moe block)");
  }
  if (plan.cp_comm != ContextParallelComm::ring && plan.mesh.cp == 1) {
    (location / "cp_comm")
        .fail(fmt::format("{} needs context parallelism (cp = 1)",
                          name_of(plan.cp_comm, kContextParallelCommNames)));
  }
  if (plan.tp_comm_overlap && !plan.sequence_parallel) {
    (location / "tp_comm_overlap")
        .fail(
            "needs sequence_parallel: the overlap pipelines its all-gathers and reduce-scatters "
            "with the GEMMs");
  }
  validate_stages(plan, location);
  validate_recompute(plan, location);
  if (std::optional<PlanRefusal> refusal =
          schedule_refusal(plan.schedule.type, plan.mesh, plan.batch)) {
    fail_at(location, *refusal);
  }
  if (!plan.cluster.gpu.peak_dense_tflops.contains(plan.precision)) {
    (location / "precision")
        .fail(fmt::format("\"{}\": the cluster's GPU ({}) has no {} peak in peak_dense_tflops",
                          name_of(plan.precision, kDtypeNames), plan.cluster.gpu.name,
                          name_of(plan.precision, kDtypeNames)));
  }
  if (plan.gradient_dtype && !allows_gradient_dtype(plan.precision, *plan.gradient_dtype)) {
    (location / "gradient_dtype")
        .fail(fmt::format("\"{}\" with precision {}: gradients are {}{}",
                          name_of(*plan.gradient_dtype, kDtypeNames),
                          name_of(plan.precision, kDtypeNames),
                          name_of(default_gradient_dtype(plan.precision), kDtypeNames),
                          plan.precision == Dtype::bf16 || quantises_gemms(plan.precision)
                              ? " (the default) or bf16"
                          : plan.precision == Dtype::fp16 ? " (the default) or fp32"
                                                          : ""));
  }
  if (plan.predicted) {
    const std::size_t ranks = plan.predicted->peak_memory_bytes_per_pipeline_rank.size();
    if (static_cast<std::int64_t>(ranks) != plan.mesh.pp) {
      (location / "predicted" / "peak_memory_bytes_per_pipeline_rank")
          .fail(
              fmt::format("{} entries for pp={}; give one per pipeline rank", ranks, plan.mesh.pp));
    }
    // A plan that says it does not fit is not a plan to run (the planner never writes one).
    const std::int64_t usable = plan.cluster.usable_memory_bytes();
    for (std::size_t rank = 0; rank < ranks; ++rank) {
      const std::int64_t peak = plan.predicted->peak_memory_bytes_per_pipeline_rank[rank];
      if (peak > usable) {
        (location / "predicted" / "peak_memory_bytes_per_pipeline_rank" / rank)
            .fail(fmt::format("{:.1f} GiB is more than the {:.1f} GiB a {} leaves usable",
                              static_cast<double>(peak) / (1u << 30),
                              static_cast<double>(usable) / (1u << 30), plan.cluster.gpu.name));
      }
    }
  }
}

}  // namespace strata::schemas
