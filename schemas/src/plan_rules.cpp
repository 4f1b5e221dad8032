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

namespace {

// The expert mesh (ep, etp) against the model's experts and the ranks it folds over.
void validate_expert_mesh_for_model(const Mesh& mesh, const ModelConfig& model,
                                    const JsonLocation& where) {
  if (!model.moe) {
    for (const auto& [key, size] : {std::pair{"ep", mesh.ep}, std::pair{"etp", mesh.etp}}) {
      if (size > 1) {
        (where / key)
            .fail(fmt::format("{} needs a mixture-of-experts model (the model has no moe block)",
                              size));
      }
    }
    return;
  }
  const MoeConfig& moe = *model.moe;
  if (moe.num_experts % mesh.ep != 0) {
    (where / "ep").fail(fmt::format("{} does not divide num_experts={}", mesh.ep, moe.num_experts));
  }
  if (moe.expert_ffn_hidden_size % mesh.etp != 0) {
    (where / "etp")
        .fail(fmt::format("{} does not divide expert_ffn_hidden_size={}", mesh.etp,
                          moe.expert_ffn_hidden_size));
  }
  // Shared experts are dense MLPs every token visits, split over tp like the dense layers.
  if (moe.num_shared_experts > 0 && moe.shared_expert_ffn_hidden_size % mesh.tp != 0) {
    (where / "tp")
        .fail(fmt::format("{} does not divide shared_expert_ffn_hidden_size={}", mesh.tp,
                          moe.shared_expert_ffn_hidden_size));
  }
  const __int128 stage_ranks = static_cast<__int128>(mesh.tp) * mesh.cp * mesh.dp;
  const __int128 expert_ranks = static_cast<__int128>(mesh.ep) * mesh.etp;
  if (stage_ranks % expert_ranks != 0) {
    (where / "ep")
        .fail(fmt::format("ep × etp = {} × {} does not divide tp × cp × dp = {}: the expert mesh "
                          "folds over each pipeline stage's ranks",
                          mesh.ep, mesh.etp, static_cast<std::int64_t>(stage_ranks)));
  }
}

}  // namespace

void validate_mesh_for_model(const Mesh& mesh, const ModelConfig& model,
                             const JsonLocation& where) {
  if (model.num_attention_heads % mesh.tp != 0) {
    (where / "tp")
        .fail(fmt::format("{} does not divide num_attention_heads={}", mesh.tp,
                          model.num_attention_heads));
  }
  // Megatron splits kv heads across tp ranks; when tp exceeds them each kv head is replicated on
  // tp / num_kv_heads ranks (as vLLM and Megatron-Core with --num-query-groups < tp do).
  if (model.num_kv_heads % mesh.tp != 0 && mesh.tp % model.num_kv_heads != 0) {
    (where / "tp")
        .fail(fmt::format("{} neither divides num_kv_heads={} nor is a multiple of it", mesh.tp,
                          model.num_kv_heads));
  }
  if (model.ffn_hidden_size % mesh.tp != 0) {
    (where / "tp")
        .fail(fmt::format("{} does not divide ffn_hidden_size={}", mesh.tp, model.ffn_hidden_size));
  }
  validate_expert_mesh_for_model(mesh, model, where);
  if (static_cast<__int128>(mesh.pp) * mesh.vpp > kMaxPipelineStages) {
    (where / "pp")
        .fail(fmt::format("pp × vpp = {} × {} = {} pipeline stages: strata simulates at most {} "
                          "(a step's work grows with the square of the stages)",
                          mesh.pp, mesh.vpp, static_cast<std::int64_t>(mesh.pp * mesh.vpp),
                          kMaxPipelineStages));
  }
  if (mesh.pp > model.num_layers + 2) {
    (where / "pp")
        .fail(fmt::format("{} pipeline ranks, but {} layer{}, the embedding and the LM head "
                          "fill at most {} stages",
                          mesh.pp, model.num_layers, model.num_layers == 1 ? "" : "s",
                          model.num_layers + 2));
  }
}

namespace {

void validate_mesh(const Plan& plan, const JsonLocation& location) {
  const Mesh& mesh = plan.mesh;
  const ModelConfig& model = plan.model;
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
  validate_mesh_for_model(mesh, model, where);
  if (const std::optional<PlanRefusal> refusal = dp_shard_refusal(mesh, plan.zero_stage)) {
    (where / "dp_shard").fail(refusal->rule);
  }
  // Causal context parallelism splits each sequence into 2·cp chunks so that every cp rank gets
  // one early and one late chunk (equal attention work), as Megatron-LM requires.
  if (mesh.cp > 1 && plan.batch.seq_length % (2 * mesh.cp) != 0) {
    (where / "cp")
        .fail(fmt::format("{}: seq_length={} is not divisible by 2 × cp = {}", mesh.cp,
                          plan.batch.seq_length, 2 * mesh.cp));
  }
}

void validate_batch(const Plan& plan, const JsonLocation& location) {
  const BatchConfig& batch = plan.batch;
  const JsonLocation where = location / "batch";
  // Plans made in memory (the planner, validate-sim's rows) meet the readers' limits here.
  if (batch.global_batch_size < 1 || batch.global_batch_size > kMaxGlobalBatchSize) {
    (where / "global_batch_size")
        .fail(fmt::format("{} is outside Strata's limit of 1 to {} sequences a step",
                          batch.global_batch_size, kMaxGlobalBatchSize));
  }
  if (batch.micro_batch_size < 1 || batch.micro_batch_size > batch.global_batch_size) {
    (where / "micro_batch_size")
        .fail(fmt::format("{} is not from 1 to the global batch {}", batch.micro_batch_size,
                          batch.global_batch_size));
  }
  if (batch.seq_length > plan.model.max_seq_length) {
    (where / "seq_length")
        .fail(fmt::format("{} is more than the model's max_seq_length={}", batch.seq_length,
                          plan.model.max_seq_length));
  }
  const std::int64_t per_micro_batch_step = batch.micro_batch_size * plan.mesh.dp;
  if (batch.global_batch_size % per_micro_batch_step != 0) {
    (where / "global_batch_size")
        .fail(fmt::format("{} is not divisible by micro_batch_size × dp = {} × {} = {}",
                          batch.global_batch_size, batch.micro_batch_size, plan.mesh.dp,
                          per_micro_batch_step));
  }
  const std::int64_t derived = batch.global_batch_size / per_micro_batch_step;
  if (batch.num_micro_batches != derived) {
    (where / "num_micro_batches")
        .fail(fmt::format("{} does not match global_batch_size / (micro_batch_size × dp) = {} / "
                          "({} × {}) = {}",
                          batch.num_micro_batches, batch.global_batch_size, batch.micro_batch_size,
                          plan.mesh.dp, derived));
  }
}

void validate_schedule(const Plan& plan, const JsonLocation& location) {
  const ScheduleType type = plan.schedule.type;
  const std::string_view name = name_of(type, kScheduleTypeNames);
  if (type == ScheduleType::interleaved_one_f_one_b && plan.mesh.vpp == 1) {
    (location / "schedule" / "type")
        .fail("interleaved-1f1b needs vpp > 1 (vpp = 1); use 1f1b for one chunk per rank");
  }
  if (plan.mesh.vpp > 1 && type != ScheduleType::interleaved_one_f_one_b &&
      type != ScheduleType::custom) {
    (location / "mesh" / "vpp")
        .fail(
            fmt::format("{} model chunks per rank need schedule interleaved-1f1b or custom, not {}",
                        plan.mesh.vpp, name));
  }
  // Megatron's interleaved schedule runs micro-batches in groups of pp per chunk.
  if (type == ScheduleType::interleaved_one_f_one_b &&
      plan.batch.num_micro_batches % plan.mesh.pp != 0) {
    (location / "batch" / "num_micro_batches")
        .fail(fmt::format("{} is not a multiple of pp={}, which interleaved-1f1b needs",
                          plan.batch.num_micro_batches, plan.mesh.pp));
  }
}

}  // namespace

void validate_plan(const Plan& plan, const JsonLocation& location) {
  validate_mesh(plan, location);
  validate_batch(plan, location);
  if (plan.sequence_parallel && plan.mesh.tp == 1) {
    (location / "sequence_parallel").fail("needs tp > 1 (tp = 1)");
  }
  if (plan.sequence_parallel && (plan.batch.seq_length / plan.mesh.cp) % plan.mesh.tp != 0) {
    (location / "sequence_parallel")
        .fail(fmt::format("seq_length / cp = {} is not divisible by tp={}",
                          plan.batch.seq_length / plan.mesh.cp, plan.mesh.tp));
  }
  // Megatron-LM requires it with ep and tp: each tp rank must route its own tokens, or the tp
  // ranks would send the same tokens to the experts tp times.
  if (plan.model.moe && plan.mesh.tp > 1 && !plan.sequence_parallel) {
    (location / "sequence_parallel")
        .fail(fmt::format("a mixture-of-experts model with tp={} needs sequence parallelism: "
                          "each tp rank routes its own share of the tokens",
                          plan.mesh.tp));
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
  validate_schedule(plan, location);
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

std::optional<PlanRefusal> dp_shard_refusal(const Mesh& mesh, std::int64_t zero_stage) {
  const auto refused = [](std::string rule) {
    return PlanRefusal{"/mesh/dp_shard", std::move(rule)};
  };
  if (mesh.dp_shard > 0 && mesh.dp % mesh.dp_shard != 0) {
    return refused(fmt::format("{} does not divide dp={}: the shard groups must tile dp",
                               mesh.dp_shard, mesh.dp));
  }
  if (mesh.zero_shard_dp() < mesh.dp && zero_stage == 0) {
    return refused(
        fmt::format("{} < dp={} shards model state, but ZeRO-0 shards none: give "
                    "zero_stage 1-3 or drop dp_shard",
                    mesh.dp_shard, mesh.dp));
  }
  if (mesh.zero_replicas() > 1 && mesh.expert_dp() % mesh.zero_replicas() != 0) {
    return refused(
        fmt::format("dp / dp_shard = {} replicas do not divide the expert "
                    "data-parallel size tp·cp·dp / (ep·etp) = {}: expert state is "
                    "sharded into the same replicas",
                    mesh.zero_replicas(), mesh.expert_dp()));
  }
  return std::nullopt;
}

std::optional<PlanRefusal> ep_comm_overlap_refusal(const Plan& plan) {
  const auto refused = [](std::string rule) {
    return PlanRefusal{"/ep_comm_overlap", std::move(rule)};
  };
  if (plan.mesh.ep * plan.mesh.etp == 1) {
    return refused(
        "needs expert parallelism (ep or etp > 1): there is no token exchange to overlap");
  }
  if (!overlaps_expert_dispatch(plan.framework)) {
    return refused(
        fmt::format("{} does not overlap the expert all-to-alls (Megatron-Core's "
                    "combined 1F1B does: framework megatron-lm or nemo)",
                    name_of(plan.framework, kTrainingFrameworkNames)));
  }
  if (plan.mesh.pp > 1 && plan.mesh.vpp == 1) {
    return refused(
        fmt::format("with pp={} the all-to-alls overlap only under the interleaved "
                    "schedule (vpp > 1), as Megatron-Core's combined 1F1B requires",
                    plan.mesh.pp));
  }
  if (plan.recompute.granularity == RecomputeGranularity::full) {
    return refused("cannot run with full recomputation (Megatron-Core's combined 1F1B refuses it)");
  }
  return std::nullopt;
}

std::optional<PlanRefusal> switch_refusal(const Plan& from, const std::string& from_name,
                                          const Plan& to) {
  if (to.model != from.model) {
    return PlanRefusal{"/model",
                       to.model.name == from.model.name
                           ? fmt::format("another {} than {}'s (the same name, other fields)",
                                         from.model.name, from_name)
                           : fmt::format("{}: another model than {}'s {}", to.model.name, from_name,
                                         from.model.name)};
  }
  if (to.precision != from.precision) {
    return PlanRefusal{"/precision",
                       fmt::format("{}: {} trains in {}", name_of(to.precision, kDtypeNames),
                                   from_name, name_of(from.precision, kDtypeNames))};
  }
  if (to.mesh.world_size() != from.mesh.world_size()) {
    return PlanRefusal{"/mesh", fmt::format("{} ranks: {} has {}", to.mesh.world_size(), from_name,
                                            from.mesh.world_size())};
  }
  return std::nullopt;
}

}  // namespace strata::schemas
