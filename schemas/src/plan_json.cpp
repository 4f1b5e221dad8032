// A plan document read (parse_plan: its fields, then validate_plan's rules) and written
// (plan_to_json).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "strata/schemas/document_kind.h"
#include "strata/schemas/object_reader.h"
#include "strata/schemas/plan.h"

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

// The plan's batch (num_micro_batches follows from the others where absent).
BatchConfig parse_batch(const ObjectReader& reader, const Mesh& mesh) {
  BatchConfig parsed;
  const ObjectReader batch(
      reader.object("batch"), reader.at("batch"),
      {"seq_length", "micro_batch_size", "global_batch_size", "num_micro_batches"});
  parsed.seq_length = batch.integer("seq_length", {1, kMaxSeqLength});
  parsed.micro_batch_size = batch.integer("micro_batch_size", {1, kMaxGlobalBatchSize});
  parsed.global_batch_size = batch.integer("global_batch_size", {1, kMaxGlobalBatchSize});
  parsed.num_micro_batches =
      batch.optional_integer("num_micro_batches", {1, kMaxGlobalBatchSize})
          .value_or(parsed.global_batch_size /
                    std::max<std::int64_t>(1, parsed.micro_batch_size * mesh.dp));
  return parsed;
}

// The recomputation: its granularity, the modules a selective one names, and how many layers
// of each stage a full one recomputes.
RecomputeConfig parse_recompute(const ObjectReader& reader) {
  RecomputeConfig parsed;
  const ObjectReader recompute(reader.object("recompute"), reader.at("recompute"),
                               {"granularity", "modules", "full_layers_per_stage"});
  parsed.granularity = recompute.choice("granularity", kRecomputeGranularityNames);
  if (recompute.has("modules")) {
    parsed.modules = recompute.choices("modules", kRecomputeModuleNames);
  }
  if (recompute.has("full_layers_per_stage")) {
    const nlohmann::json& counts = recompute.array("full_layers_per_stage", 1);
    for (std::size_t i = 0; i < counts.size(); ++i) {
      parsed.full_layers_per_stage.push_back(
          read_integer(counts[i], recompute.at("full_layers_per_stage") / i, {0, kMaxLayers}));
    }
  }
  return parsed;
}

// The schedule: a generator's name, or a custom schedule's file.
ScheduleConfig parse_schedule(const ObjectReader& reader) {
  ScheduleConfig parsed;
  const ObjectReader schedule(reader.object("schedule"), reader.at("schedule"), {"type", "file"});
  parsed.type = schedule.choice("type", kScheduleTypeNames);
  if (parsed.type == ScheduleType::custom) {
    parsed.file = schedule.string("file");
  } else if (schedule.has("file")) {
    schedule.at("file").fail(fmt::format("only a custom schedule reads a file (type is \"{}\")",
                                         name_of(parsed.type, kScheduleTypeNames)));
  }
  return parsed;
}

// The pipeline's stages, in order.
std::vector<PipelineStage> parse_stages(const ObjectReader& reader) {
  std::vector<PipelineStage> parsed;
  const ObjectReader pipeline(reader.object("pipeline"), reader.at("pipeline"), {"stages"});
  const nlohmann::json& stages = pipeline.array("stages", 1);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const ObjectReader stage(stages[i], pipeline.at("stages") / i,
                             {"first_layer", "num_layers", "embedding", "lm_head"});
    parsed.push_back({stage.integer("first_layer", {0, kMaxLayers}),
                      stage.integer("num_layers", {0, kMaxLayers}), stage.boolean("embedding"),
                      stage.boolean("lm_head")});
  }
  return parsed;
}

// A content hash must be of its form and match the embedded model and cluster: a plan edited
// after it was made is refused.
void check_content_hash(const ObjectReader& reader, const std::string& content_hash,
                        const Plan& plan) {
  if (!std::regex_match(content_hash, std::regex("fnv1a64:[0-9a-f]{16}"))) {
    reader.at("content_hash")
        .fail(fmt::format("\"{}\" is not of the form fnv1a64:<16 lowercase hex digits>",
                          content_hash));
  }
  const std::string actual = plan_content_hash(plan.model, plan.cluster);
  if (content_hash != actual) {
    reader.at("content_hash")
        .fail(fmt::format("{} does not match the embedded model and cluster ({}): they were "
                          "edited after the plan was made; re-plan, or remove content_hash to "
                          "accept the edit",
                          content_hash, actual));
  }
}

}  // namespace

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

  plan.batch = parse_batch(reader, plan.mesh);

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

  plan.recompute = parse_recompute(reader);

  plan.schedule = parse_schedule(reader);

  plan.stages = parse_stages(reader);

  plan.precision = reader.choice("precision", kDtypeNames);
  plan.gradient_dtype = reader.optional_choice("gradient_dtype", kDtypeNames);
  if (reader.has("predicted")) {
    plan.predicted = parse_predicted(ObjectReader(
        reader.object("predicted"), reader.at("predicted"),
        {"step_time_s", "tokens_per_s", "mfu", "peak_memory_bytes_per_pipeline_rank", "tool"}));
  }

  if (content_hash) check_content_hash(reader, *content_hash, plan);
  validate_plan(plan, location);
  return plan;
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
