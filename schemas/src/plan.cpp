#include "strata/schemas/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "strata/schemas/document_kind.h"
#include "strata/schemas/object_reader.h"

namespace strata::schemas {

std::array<MeshAxis, 4> parse_mesh_order(const ObjectReader& reader) {
  const std::string text = reader.string("order");
  std::array<MeshAxis, 4> order{};
  std::size_t count = 0;
  bool seen[4] = {false, false, false, false};
  bool valid = true;
  std::size_t start = 0;
  while (valid && start <= text.size()) {
    const std::size_t dash = std::min(text.find('-', start), text.size());
    const std::optional<MeshAxis> axis = value_of(text.substr(start, dash - start), kMeshAxisNames);
    valid = axis && count < 4 && !seen[static_cast<int>(*axis)];
    if (valid) {
      seen[static_cast<int>(*axis)] = true;
      order[count++] = *axis;
    }
    start = dash + 1;
  }
  if (!valid || count != 4) {
    reader.at("order").fail(
        fmt::format("\"{}\" must name each of tp, cp, dp and pp once, joined "
                    "by '-', fastest-varying first (e.g. \"tp-cp-dp-pp\")",
                    text));
  }
  return order;
}

namespace {

Mesh parse_mesh(const ObjectReader& reader) {
  Mesh mesh;
  mesh.tp = reader.integer("tp", {1, kMaxMeshAxisSize});
  mesh.cp = reader.integer("cp", {1, kMaxMeshAxisSize});
  mesh.dp = reader.integer("dp", {1, kMaxMeshAxisSize});
  mesh.pp = reader.integer("pp", {1, kMaxLayers + 2});
  mesh.vpp = reader.integer("vpp", {1, kMaxLayers});
  mesh.order = parse_mesh_order(reader);
  mesh.dp_shard = reader.optional_integer("dp_shard", {1, kMaxMeshAxisSize}).value_or(0);
  mesh.ep = reader.optional_integer("ep", {1, kMaxMeshAxisSize}).value_or(1);
  mesh.etp = reader.optional_integer("etp", {1, kMaxMeshAxisSize}).value_or(1);
  return mesh;
}

PredictedMetrics parse_predicted(const ObjectReader& reader) {
  PredictedMetrics predicted;
  const NumberRange positive{.minimum = 0, .maximum = 1e15, .minimum_exclusive = true};
  predicted.step_time_s = reader.number("step_time_s", positive);
  predicted.tokens_per_s = reader.number("tokens_per_s", positive);
  predicted.mfu = reader.number("mfu", {.minimum = 0, .maximum = 1});
  const nlohmann::json& peaks = reader.array("peak_memory_bytes_per_pipeline_rank", 1);
  for (std::size_t i = 0; i < peaks.size(); ++i) {
    predicted.peak_memory_bytes_per_pipeline_rank.push_back(
        read_integer(peaks[i], reader.at("peak_memory_bytes_per_pipeline_rank") / i,
                     {0, std::int64_t{1} << 50}));
  }
  predicted.tool = reader.optional_string("tool");
  return predicted;
}

}  // namespace

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

bool recomputes_module(const RecomputeConfig& recompute, RecomputeModule module) {
  if (recompute.granularity != RecomputeGranularity::selective) return false;
  if (recompute.modules.empty()) return module == RecomputeModule::core_attn;
  return std::find(recompute.modules.begin(), recompute.modules.end(), module) !=
         recompute.modules.end();
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
  if (mesh.dp_shard > 0 && mesh.dp % mesh.dp_shard != 0) {
    (where / "dp_shard")
        .fail(fmt::format("{} does not divide dp={}: the shard groups must tile dp", mesh.dp_shard,
                          mesh.dp));
  }
  if (mesh.zero_shard_dp() < mesh.dp && plan.zero_stage == 0) {
    (where / "dp_shard")
        .fail(fmt::format("{} < dp={} shards model state, but ZeRO-0 shards none: give zero_stage "
                          "1-3 or drop dp_shard",
                          mesh.dp_shard, mesh.dp));
  }
  if (mesh.zero_replicas() > 1 && mesh.expert_dp() % mesh.zero_replicas() != 0) {
    (where / "dp_shard")
        .fail(fmt::format("dp / dp_shard = {} replicas do not divide the expert data-parallel "
                          "size tp·cp·dp / (ep·etp) = {}: expert state is sharded into the same "
                          "replicas",
                          mesh.zero_replicas(), mesh.expert_dp()));
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

std::int64_t Mesh::size_of(MeshAxis axis) const {
  switch (axis) {
    case MeshAxis::tp:
      return tp;
    case MeshAxis::cp:
      return cp;
    case MeshAxis::dp:
      return dp;
    case MeshAxis::pp:
      return pp;
  }
  return 1;
}

std::string mesh_order_to_string(const std::array<MeshAxis, 4>& order) {
  std::string text;
  for (MeshAxis axis : order) {
    if (!text.empty()) text += '-';
    text += name_of(axis, kMeshAxisNames);
  }
  return text;
}

std::vector<PipelineStage> even_pipeline_stages(std::int64_t num_layers, std::int64_t num_stages,
                                                bool embedding_as_layer, bool loss_as_layer) {
  const std::int64_t slots = num_layers + (embedding_as_layer ? 1 : 0) + (loss_as_layer ? 1 : 0);
  std::vector<PipelineStage> stages;
  std::int64_t next_layer = 0;
  for (std::int64_t s = 0; s < num_stages; ++s) {
    std::int64_t layers = slots / num_stages + (s < slots % num_stages ? 1 : 0);
    if (s == 0 && embedding_as_layer) layers -= 1;
    if (s + 1 == num_stages && loss_as_layer) layers -= 1;
    layers = std::max<std::int64_t>(0, layers);
    stages.push_back({next_layer, layers, s == 0, s + 1 == num_stages});
    next_layer += layers;
  }
  return stages;
}

std::string plan_content_hash(const ModelConfig& model, const ClusterConfig& cluster) {
  // FNV-1a: a stable, dependency-free fingerprint for spotting edits, not a security measure.
  const std::string canonical =
      model_to_json(model).dump() + "\n" + cluster_to_json(cluster).dump();
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : canonical) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return fmt::format("fnv1a64:{:016x}", hash);
}

Plan parse_plan(const nlohmann::json& document, const JsonLocation& location) {
  const ObjectReader reader(document, location,
                            {kSchemaVersionKey,
                             kKindKey,
                             kEditorSchemaKey,
                             kDescriptionKey,
                             "model",
                             "cluster",
                             "content_hash",
                             "mesh",
                             "batch",
                             "sequence_parallel",
                             "zero_stage",
                             "overlap_grad_reduce",
                             "gradient_bucket_elements",
                             "tp_comm_overlap",
                             "framework",
                             "attention",
                             "cp_comm",
                             "expert_load_imbalance",
                             "ep_comm_overlap",
                             "cuda_graph_scope",
                             "recompute",
                             "schedule",
                             "pipeline",
                             "precision",
                             "gradient_dtype",
                             "predicted"});
  check_document_header(reader, DocumentKind::plan, kPlanSchemaVersion);
  Plan plan;
  plan.description = reader.optional_string(kDescriptionKey);
  plan.model = parse_model(reader.object("model"), reader.at("model"));
  plan.cluster = parse_cluster(reader.object("cluster"), reader.at("cluster"));
  const std::optional<std::string> content_hash = reader.optional_string("content_hash");

  plan.mesh =
      parse_mesh(ObjectReader(reader.object("mesh"), reader.at("mesh"),
                              {"tp", "cp", "dp", "pp", "vpp", "order", "dp_shard", "ep", "etp"}));

  const ObjectReader batch(
      reader.object("batch"), reader.at("batch"),
      {"seq_length", "micro_batch_size", "global_batch_size", "num_micro_batches"});
  plan.batch.seq_length = batch.integer("seq_length", {1, kMaxSeqLength});
  plan.batch.micro_batch_size = batch.integer("micro_batch_size", {1, kMaxGlobalBatchSize});
  plan.batch.global_batch_size = batch.integer("global_batch_size", {1, kMaxGlobalBatchSize});
  plan.batch.num_micro_batches =
      batch.optional_integer("num_micro_batches", {1, kMaxGlobalBatchSize})
          .value_or(plan.batch.global_batch_size /
                    std::max<std::int64_t>(1, plan.batch.micro_batch_size * plan.mesh.dp));

  plan.sequence_parallel = reader.boolean("sequence_parallel");
  plan.zero_stage = reader.integer("zero_stage", {0, 3});
  plan.overlap_grad_reduce = reader.optional_boolean("overlap_grad_reduce").value_or(true);
  plan.gradient_bucket_elements =
      reader.optional_integer("gradient_bucket_elements", {1, kMaxGradientBucketElements});
  plan.tp_comm_overlap = reader.optional_boolean("tp_comm_overlap").value_or(false);
  plan.framework = reader.optional_choice("framework", kTrainingFrameworkNames)
                       .value_or(TrainingFramework::strata);
  plan.attention =
      reader.optional_choice("attention", kAttentionKernelNames).value_or(AttentionKernel::flash);
  plan.cp_comm = reader.optional_choice("cp_comm", kContextParallelCommNames)
                     .value_or(ContextParallelComm::ring);
  plan.expert_load_imbalance =
      reader.optional_number("expert_load_imbalance", {.minimum = 1, .maximum = kMaxExperts});
  plan.ep_comm_overlap = reader.optional_boolean("ep_comm_overlap").value_or(false);
  if (reader.has("cuda_graph_scope")) {
    plan.cuda_graph_scope = reader.choices("cuda_graph_scope", kCudaGraphScopeNames);
  }

  const ObjectReader recompute(reader.object("recompute"), reader.at("recompute"),
                               {"granularity", "modules", "full_layers_per_stage"});
  plan.recompute.granularity = recompute.choice("granularity", kRecomputeGranularityNames);
  if (recompute.has("modules")) {
    plan.recompute.modules = recompute.choices("modules", kRecomputeModuleNames);
  }
  if (recompute.has("full_layers_per_stage")) {
    const nlohmann::json& counts = recompute.array("full_layers_per_stage", 1);
    for (std::size_t i = 0; i < counts.size(); ++i) {
      plan.recompute.full_layers_per_stage.push_back(
          read_integer(counts[i], recompute.at("full_layers_per_stage") / i, {0, kMaxLayers}));
    }
  }

  const ObjectReader schedule(reader.object("schedule"), reader.at("schedule"), {"type", "file"});
  plan.schedule.type = schedule.choice("type", kScheduleTypeNames);
  if (plan.schedule.type == ScheduleType::custom) {
    plan.schedule.file = schedule.string("file");
  } else if (schedule.has("file")) {
    schedule.at("file").fail(fmt::format("only a custom schedule reads a file (type is \"{}\")",
                                         name_of(plan.schedule.type, kScheduleTypeNames)));
  }

  const ObjectReader pipeline(reader.object("pipeline"), reader.at("pipeline"), {"stages"});
  const nlohmann::json& stages = pipeline.array("stages", 1);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const ObjectReader stage(stages[i], pipeline.at("stages") / i,
                             {"first_layer", "num_layers", "embedding", "lm_head"});
    plan.stages.push_back({stage.integer("first_layer", {0, kMaxLayers}),
                           stage.integer("num_layers", {0, kMaxLayers}), stage.boolean("embedding"),
                           stage.boolean("lm_head")});
  }

  plan.precision = reader.choice("precision", kDtypeNames);
  plan.gradient_dtype = reader.optional_choice("gradient_dtype", kDtypeNames);
  if (reader.has("predicted")) {
    plan.predicted = parse_predicted(ObjectReader(
        reader.object("predicted"), reader.at("predicted"),
        {"step_time_s", "tokens_per_s", "mfu", "peak_memory_bytes_per_pipeline_rank", "tool"}));
  }

  if (content_hash && !std::regex_match(*content_hash, std::regex("fnv1a64:[0-9a-f]{16}"))) {
    reader.at("content_hash")
        .fail(fmt::format("\"{}\" is not of the form fnv1a64:<16 lowercase hex digits>",
                          *content_hash));
  }
  if (content_hash) {
    const std::string actual = plan_content_hash(plan.model, plan.cluster);
    if (*content_hash != actual) {
      reader.at("content_hash")
          .fail(fmt::format("{} does not match the embedded model and cluster ({}): they were "
                            "edited after the plan was made; re-plan, or remove content_hash to "
                            "accept the edit",
                            *content_hash, actual));
    }
  }
  validate_plan(plan, location);
  return plan;
}

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
  if (plan.ep_comm_overlap && plan.mesh.ep * plan.mesh.etp == 1) {
    (location / "ep_comm_overlap")
        .fail("needs expert parallelism (ep or etp > 1): there is no token exchange to overlap");
  }
  if (plan.ep_comm_overlap && !overlaps_expert_dispatch(plan.framework)) {
    (location / "ep_comm_overlap")
        .fail(fmt::format("{} does not overlap the expert all-to-alls (Megatron-Core's combined "
                          "1F1B does: framework megatron-lm or nemo)",
                          name_of(plan.framework, kTrainingFrameworkNames)));
  }
  if (plan.ep_comm_overlap && plan.mesh.pp > 1 && plan.mesh.vpp == 1) {
    (location / "ep_comm_overlap")
        .fail(fmt::format("with pp={} the all-to-alls overlap only under the interleaved schedule "
                          "(vpp > 1), as Megatron-Core's combined 1F1B requires",
                          plan.mesh.pp));
  }
  if (plan.ep_comm_overlap && plan.recompute.granularity == RecomputeGranularity::full) {
    (location / "ep_comm_overlap")
        .fail("cannot run with full recomputation (Megatron-Core's combined 1F1B refuses it)");
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

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json stages = nlohmann::json::array();
  for (const PipelineStage& stage : plan.stages) {
    stages.push_back({{"first_layer", stage.first_layer},
                      {"num_layers", stage.num_layers},
                      {"embedding", stage.embedding},
                      {"lm_head", stage.lm_head}});
  }
  nlohmann::json recompute = {
      {"granularity", name_of(plan.recompute.granularity, kRecomputeGranularityNames)}};
  if (!plan.recompute.modules.empty()) {
    nlohmann::json modules = nlohmann::json::array();
    for (RecomputeModule module : plan.recompute.modules) {
      modules.push_back(name_of(module, kRecomputeModuleNames));
    }
    recompute["modules"] = std::move(modules);
  }
  if (!plan.recompute.full_layers_per_stage.empty()) {
    recompute["full_layers_per_stage"] = plan.recompute.full_layers_per_stage;
  }
  nlohmann::json schedule = {{"type", name_of(plan.schedule.type, kScheduleTypeNames)}};
  if (plan.schedule.type == ScheduleType::custom) schedule["file"] = plan.schedule.file;

  nlohmann::json document = {{kSchemaVersionKey, kPlanSchemaVersion},
                             {kKindKey, "plan"},
                             {"model", model_to_json(plan.model)},
                             {"cluster", cluster_to_json(plan.cluster)},
                             {"content_hash", plan_content_hash(plan.model, plan.cluster)},
                             {"mesh",
                              {{"tp", plan.mesh.tp},
                               {"cp", plan.mesh.cp},
                               {"dp", plan.mesh.dp},
                               {"pp", plan.mesh.pp},
                               {"vpp", plan.mesh.vpp},
                               {"order", mesh_order_to_string(plan.mesh.order)}}},
                             {"batch",
                              {{"seq_length", plan.batch.seq_length},
                               {"micro_batch_size", plan.batch.micro_batch_size},
                               {"global_batch_size", plan.batch.global_batch_size},
                               {"num_micro_batches", plan.batch.num_micro_batches}}},
                             {"sequence_parallel", plan.sequence_parallel},
                             {"zero_stage", plan.zero_stage},
                             {"overlap_grad_reduce", plan.overlap_grad_reduce},
                             {"recompute", recompute},
                             {"schedule", schedule},
                             {"pipeline", {{"stages", stages}}},
                             {"precision", name_of(plan.precision, kDtypeNames)}};
  // Written only when on, so plans of earlier versions read and write back unchanged.
  if (plan.mesh.zero_shard_dp() < plan.mesh.dp) document["mesh"]["dp_shard"] = plan.mesh.dp_shard;
  if (plan.mesh.ep > 1) document["mesh"]["ep"] = plan.mesh.ep;
  if (plan.mesh.etp > 1) document["mesh"]["etp"] = plan.mesh.etp;
  if (plan.tp_comm_overlap) document["tp_comm_overlap"] = true;
  if (plan.gradient_bucket_elements) {
    document["gradient_bucket_elements"] = *plan.gradient_bucket_elements;
  }
  if (plan.attention != AttentionKernel::flash) {
    document["attention"] = name_of(plan.attention, kAttentionKernelNames);
  }
  if (plan.cp_comm != ContextParallelComm::ring) {
    document["cp_comm"] = name_of(plan.cp_comm, kContextParallelCommNames);
  }
  if (plan.expert_load_imbalance) document["expert_load_imbalance"] = *plan.expert_load_imbalance;
  if (plan.ep_comm_overlap) document["ep_comm_overlap"] = true;
  if (!plan.cuda_graph_scope.empty()) {
    nlohmann::json scopes = nlohmann::json::array();
    for (CudaGraphScope scope : plan.cuda_graph_scope) {
      scopes.push_back(name_of(scope, kCudaGraphScopeNames));
    }
    document["cuda_graph_scope"] = std::move(scopes);
  }
  if (plan.gradient_dtype) document["gradient_dtype"] = name_of(*plan.gradient_dtype, kDtypeNames);
  if (plan.framework != TrainingFramework::strata) {
    document["framework"] = name_of(plan.framework, kTrainingFrameworkNames);
  }
  if (plan.description) document[kDescriptionKey] = *plan.description;
  if (plan.predicted) {
    nlohmann::json predicted = {{"step_time_s", plan.predicted->step_time_s},
                                {"tokens_per_s", plan.predicted->tokens_per_s},
                                {"mfu", plan.predicted->mfu},
                                {"peak_memory_bytes_per_pipeline_rank",
                                 plan.predicted->peak_memory_bytes_per_pipeline_rank}};
    if (plan.predicted->tool) predicted["tool"] = *plan.predicted->tool;
    document["predicted"] = predicted;
  }
  return document;
}

}  // namespace strata::schemas
