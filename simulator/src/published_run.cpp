#include "strata/simulator/published_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <limits>
#include <sstream>

#include "strata/schemas/json_file.h"
#include "strata/schemas/mla_config.h"
#include "strata/schemas/moe_config.h"
#include "strata/schemas/multi_token_prediction.h"
#include "strata/schemas/object_reader.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::simulator {
namespace {

using schemas::IntegerRange;
using schemas::JsonLocation;
using schemas::NumberRange;
using schemas::ObjectReader;

// A row's fields may be null or absent: "the source does not say". A complete row needs the ones
// its simulation uses; every field that is there is checked for type and range.
class RowReader {
 public:
  RowReader(const nlohmann::json& value, JsonLocation location,
            std::initializer_list<std::string_view> keys, bool complete)
      : reader_(value, std::move(location), keys), complete_(complete) {}

  const ObjectReader& reader() const { return reader_; }
  bool given(std::string_view key) const {
    return reader_.has(key) && !reader_.value(key).is_null();
  }
  // Absent or null: nothing, unless a complete row needs it.
  std::optional<std::int64_t> integer(std::string_view key, IntegerRange range,
                                      bool needed = false) const {
    if (!given(key)) return missing<std::int64_t>(key, needed);
    return reader_.integer(key, range);
  }
  std::optional<double> number(std::string_view key, NumberRange range, bool needed = false) const {
    if (!given(key)) return missing<double>(key, needed);
    return reader_.number(key, range);
  }
  std::optional<bool> boolean(std::string_view key, bool needed = false) const {
    if (!given(key)) return missing<bool>(key, needed);
    return reader_.boolean(key);
  }
  std::optional<std::string> text(std::string_view key, bool needed = false) const {
    if (!given(key)) return missing<std::string>(key, needed);
    return reader_.string(key);
  }
  template <typename Enum, std::size_t N>
  std::optional<Enum> choice(std::string_view key,
                             const std::array<schemas::EnumName<Enum>, N>& names,
                             bool needed = false) const {
    if (!given(key)) return missing<Enum>(key, needed);
    return reader_.choice(key, names);
  }
  // A member object (an empty one when absent or null).
  const nlohmann::json& object(std::string_view key, bool needed = false) const {
    static const nlohmann::json kEmpty = nlohmann::json::object();
    if (!given(key)) {
      missing<bool>(key, needed);
      return kEmpty;
    }
    return reader_.object(key);
  }

 private:
  template <class T>
  std::optional<T> missing(std::string_view key, bool needed) const {
    if (needed && complete_) {
      reader_.at(key).fail("required in a complete row (null or absent means unknown)");
    }
    return std::nullopt;
  }

  ObjectReader reader_;
  bool complete_;
};

enum class MlpKind { gelu, swiglu, squared_relu };
constexpr std::array<schemas::EnumName<MlpKind>, 3> kMlpNames{
    {{MlpKind::gelu, "gelu"},
     {MlpKind::swiglu, "swiglu"},
     {MlpKind::squared_relu, "squared_relu"}}};
enum class Tier { a, b, c };
constexpr std::array<schemas::EnumName<Tier>, 3> kTierNames{
    {{Tier::a, "A"}, {Tier::b, "B"}, {Tier::c, "C"}}};
RowReader row_reader(const nlohmann::json& value, const JsonLocation& location, bool complete) {
  return RowReader(
      value, location,
      {"id", "source", "tier", "complete", "model", "system", "parallel", "software", "measured"},
      complete);
}
constexpr NumberRange kPositiveNumber{.minimum = 0, .maximum = 1e15, .minimum_exclusive = true};

std::optional<schemas::ModelConfig> row_model(const std::string& id, const nlohmann::json& value,
                                              const JsonLocation& location, bool complete) {
  const RowReader row(
      value, location,
      {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads",
       "head_dim", "vocab_size", "seq_length", "mlp", "moe", "mla", "sliding_window", "mtp"},
      complete);
  const auto layers = row.integer("num_layers", {1, schemas::kMaxLayers}, true);
  const auto hidden = row.integer("hidden_size", {1, schemas::kMaxHiddenSize}, true);
  const auto ffn = row.integer("ffn_hidden_size", {1, 4 * schemas::kMaxHiddenSize}, true);
  const auto heads = row.integer("num_attention_heads", {1, schemas::kMaxHeads}, true);
  const auto kv_heads = row.integer("num_kv_heads", {1, schemas::kMaxHeads});
  const auto vocab = row.integer("vocab_size", {1, schemas::kMaxVocabSize}, true);
  const auto seq = row.integer("seq_length", {1, schemas::kMaxSeqLength}, true);
  const MlpKind mlp = row.choice("mlp", kMlpNames).value_or(MlpKind::gelu);
  const auto head_dim = row.integer("head_dim", {1, schemas::kMaxHiddenSize});
  // Mixture-of-experts, latent-attention, sliding-window and multi-token-prediction blocks in the
  // model file's format.
  std::optional<schemas::MoeConfig> moe;
  if (row.given("moe") && layers) {
    moe = schemas::parse_moe(row.reader().value("moe"), location / "moe", *layers);
  }
  std::optional<schemas::MlaConfig> mla;
  if (row.given("mla")) mla = schemas::parse_mla(row.reader().value("mla"), location / "mla");
  std::optional<schemas::SlidingWindow> window;
  if (row.given("sliding_window")) {
    window = schemas::parse_sliding_window(row.reader().value("sliding_window"),
                                           location / "sliding_window");
  }
  std::optional<schemas::MultiTokenPrediction> mtp;
  if (row.given("mtp")) {
    mtp = schemas::parse_multi_token_prediction(row.reader().value("mtp"), location / "mtp");
  }
  if (!complete) return std::nullopt;
  const bool llama = mlp == MlpKind::swiglu;
  schemas::ModelConfig model = schemas::ModelConfig::defaults_for(
      llama ? schemas::Architecture::llama : schemas::Architecture::gpt);
  model.name = id;
  model.num_layers = *layers;
  model.hidden_size = *hidden;
  model.ffn_hidden_size = *ffn;
  model.num_attention_heads = *heads;
  model.num_kv_heads = kv_heads.value_or(*heads);
  if (!head_dim && model.hidden_size % model.num_attention_heads != 0) {
    (location / "num_attention_heads")
        .fail(fmt::format("{} does not divide hidden_size={}", model.num_attention_heads,
                          model.hidden_size));
  }
  model.head_dim = head_dim.value_or(model.hidden_size / model.num_attention_heads);
  model.moe = moe;
  model.mla = mla;
  model.sliding_window = window;
  model.mtp = mtp;
  if (mla) model.head_dim = mla->qk_head_dim();
  model.vocab_size = *vocab;
  model.max_seq_length = *seq;
  if (!llama) {
    // GPT-style runs of Megatron-LM: hidden and attention dropout 0.1.
    model.dropout = 0.1;
    if (mlp == MlpKind::squared_relu) model.mlp_activation = schemas::MlpActivation::squared_relu;
  }
  schemas::validate_model(model, location);
  return model;
}

std::optional<schemas::PlanKnobs> row_knobs(const nlohmann::json& value,
                                            const JsonLocation& location, bool complete) {
  const RowReader row(
      value, location,
      {"tp", "pp", "dp", "cp", "vpp", "ep", "etp", "micro_batch_size", "global_batch_size",
       "sequence_parallel", "recompute", "recompute_modules", "zero_stage", "precision",
       "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"},
      complete);
  schemas::PlanKnobs knobs;
  const IntegerRange axis{1, schemas::kMaxMeshAxisSize};
  const IntegerRange batch{1, schemas::kMaxGlobalBatchSize};
  knobs.mesh.tp = row.integer("tp", axis, true).value_or(1);
  knobs.mesh.pp = row.integer("pp", {1, schemas::kMaxLayers + 2}, true).value_or(1);
  knobs.mesh.dp = row.integer("dp", axis, true).value_or(1);
  knobs.mesh.cp = row.integer("cp", axis).value_or(1);
  knobs.mesh.vpp = row.integer("vpp", {1, schemas::kMaxLayers}).value_or(1);
  knobs.mesh.ep = row.integer("ep", axis).value_or(1);
  knobs.mesh.etp = row.integer("etp", axis).value_or(1);
  knobs.micro_batch_size = row.integer("micro_batch_size", batch, true).value_or(1);
  knobs.global_batch_size = row.integer("global_batch_size", batch, true).value_or(1);
  knobs.sequence_parallel = row.boolean("sequence_parallel", true).value_or(false);
  knobs.zero_stage = row.integer("zero_stage", {0, 3}, true).value_or(0);
  // Megatron's options that count the embedding and the loss as layers of the pipeline split
  // (absent: off, its default).
  knobs.embedding_in_pipeline_split =
      row.boolean("account_for_embedding_in_pipeline_split").value_or(false);
  knobs.loss_in_pipeline_split = row.boolean("account_for_loss_in_pipeline_split").value_or(false);
  // Set from the row's software block (row_software_defaults).
  knobs.overlap_grad_reduce = false;
  knobs.recompute = row.choice("recompute", schemas::kRecomputeGranularityNames, true)
                        .value_or(schemas::RecomputeGranularity::none);
  // Megatron-Core's --recompute-modules of a selective run (absent: its default, core_attn).
  if (row.given("recompute_modules")) {
    knobs.recompute_modules =
        row.reader().choices("recompute_modules", schemas::kRecomputeModuleNames);
  }
  knobs.precision =
      row.choice("precision", schemas::kDtypeNames, true).value_or(schemas::Dtype::bf16);
  knobs.schedule = knobs.mesh.vpp > 1 ? schemas::ScheduleType::interleaved_one_f_one_b
                                      : schemas::ScheduleType::one_f_one_b;
  if (!complete) return std::nullopt;
  return knobs;
}

RunSoftware row_software(const nlohmann::json& value, const JsonLocation& location) {
  const RowReader row(value, location,
                      {"framework", "attention", "tp_comm_overlap", "overlap_grad_reduce",
                       "ep_comm_overlap", "gradient_dtype", "cuda_graph_scope"},
                      false);
  RunSoftware software;
  software.framework = row.choice("framework", schemas::kTrainingFrameworkNames);
  software.attention = row.choice("attention", schemas::kAttentionKernelNames);
  software.tp_comm_overlap = row.boolean("tp_comm_overlap");
  software.overlap_grad_reduce = row.boolean("overlap_grad_reduce");
  software.ep_comm_overlap = row.boolean("ep_comm_overlap");
  software.gradient_dtype = row.choice("gradient_dtype", schemas::kDtypeNames);
  // The recipe's --cuda-graph-scope (absent: none captured).
  if (row.given("cuda_graph_scope")) {
    software.cuda_graph_scope =
        row.reader().choices("cuda_graph_scope", schemas::kCudaGraphScopeNames);
  }
  return software;
}

// How a row's stack reduces gradients when the row does not say. Megatron-LM reduces them after
// the backward unless --overlap-grad-reduce is given (Megatron-LM before Megatron-Core, 2021–22,
// always did), and so do DeepSpeed's engines by default (overlap_comm off; the pipeline engine
// always); NeMo's Megatron-Core recipes turn the overlap on, and FSDP stacks (torchtitan,
// llm-foundry) reduce-scatter each layer's gradients during the backward by design. A row naming
// no framework is simulated as Megatron-LM's default.
bool overlaps_grad_reduce_by_default(std::optional<schemas::TrainingFramework> framework) {
  using schemas::TrainingFramework;
  return framework == TrainingFramework::nemo || framework == TrainingFramework::torchtitan ||
         framework == TrainingFramework::llm_foundry;
}

// Whether a row's stack pipelines tp collectives with the GEMMs when the row does not say: NeMo's
// performance recipes turn Transformer Engine's userbuffer overlap on whenever tp > 1 with
// sequence parallelism; Megatron-LM leaves --tp-comm-overlap off, and the others have no such
// overlap. It needs sequence parallelism, so a row without it cannot have it.
bool overlaps_tp_comm(const RunSoftware& software, bool sequence_parallel) {
  return sequence_parallel &&
         software.tp_comm_overlap.value_or(software.framework == schemas::TrainingFramework::nemo);
}

}  // namespace

schemas::ClusterConfig published_run_cluster(const std::string& gpu, std::int64_t num_gpus,
                                             std::int64_t gpus_per_node,
                                             std::optional<double> inter_node_gbps_per_gpu,
                                             const JsonLocation& location) {
  // The GPU names rows use, and the preset whose nodes hold them.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kGpuPresets{{
      {"a100-sxm4-80gb", "dgx-a100-80gb"},
      {"a100-sxm4-40gb", "dgx-a100-40gb"},
      {"h100-sxm5-80gb", "dgx-h100"},
      {"b200-sxm-180gb", "dgx-b200"},
      {"gb200-186gb", "gb200-nvl72"},
  }};
  std::string preset;
  std::vector<std::string_view> names;
  for (const auto& [name, preset_name] : kGpuPresets) {
    if (gpu == name) preset = preset_name;
    names.push_back(name);
  }
  if (preset.empty()) {
    (location / "gpu").fail(fmt::format("\"{}\" is not one of {}", gpu, fmt::join(names, ", ")));
  }
  const schemas::ClusterConfig node = schemas::cluster_preset(preset);
  if (gpus_per_node > node.gpus_per_node) {
    (location / "gpus_per_node")
        .fail(fmt::format("{} is more than the {} node's {}", gpus_per_node, preset,
                          node.gpus_per_node));
  }
  // A job on part of a node (num_gpus below gpus_per_node) uses that many GPUs of one node.
  const std::int64_t used_per_node = std::min(gpus_per_node, num_gpus);
  if (num_gpus <= 0 || num_gpus % used_per_node != 0) {
    (location / "num_gpus")
        .fail(fmt::format("{} is not a multiple of gpus_per_node={}", num_gpus, gpus_per_node));
  }
  schemas::ClusterConfig cluster = schemas::cluster_preset(
      fmt::format("{}:{}x{}", preset, num_gpus / used_per_node, used_per_node));
  if (inter_node_gbps_per_gpu) {
    cluster.network_tiers.back().bandwidth_gb_per_s = *inter_node_gbps_per_gpu / 8.0;
  }
  return cluster;
}

std::vector<PublishedRun> read_published_runs(const std::filesystem::path& path) {
  const std::string content = schemas::read_text_file(path);
  std::istringstream lines(content);
  std::string line;
  std::vector<PublishedRun> runs;
  for (std::int64_t number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string source = fmt::format("{}:{}", path.string(), number);
    const nlohmann::json value = schemas::parse_json_text(line, source);
    const JsonLocation location(source);
    // The same strictness as a plan: an object, known keys only, types and ranges checked.
    const bool complete = row_reader(value, location, false).reader().boolean("complete");
    const RowReader row = row_reader(value, location, complete);
    PublishedRun run;
    run.id = row.reader().string("id");
    run.source = row.text("source").value_or("");
    if (auto tier = row.choice("tier", kTierNames)) run.tier = schemas::name_of(*tier, kTierNames);
    run.complete = complete;
    run.software = row_software(row.object("software"), location / "software");
    const RowReader measured(
        row.object("measured", true), location / "measured",
        {"iteration_time_s", "iteration_time_inferred", "tflops_per_gpu", "tflops_definition"},
        false);
    run.measured_step_time_s = measured.number("iteration_time_s", kPositiveNumber);
    measured.boolean("iteration_time_inferred");
    measured.number("tflops_per_gpu", kPositiveNumber);
    measured.text("tflops_definition");

    const RowReader system(row.object("system", true), location / "system",
                           {"gpu", "num_gpus", "gpus_per_node", "inter_node_gbps_per_gpu"},
                           complete);
    const auto gpu = system.text("gpu", true);
    const auto gpus = system.integer("num_gpus", {1, schemas::kMaxMeshAxisSize}, true);
    const auto gpus_per_node = system.integer("gpus_per_node", {1, schemas::kMaxGpusPerNode}, true);
    const auto inter_node = system.number("inter_node_gbps_per_gpu", kPositiveNumber);
    const auto model = row_model(run.id, row.object("model", true), location / "model", complete);
    const auto knobs = row_knobs(row.object("parallel", true), location / "parallel", complete);
    if (complete) {
      const schemas::ClusterConfig cluster =
          published_run_cluster(*gpu, *gpus, *gpus_per_node, inter_node, location / "system");
      schemas::PlanKnobs run_knobs = *knobs;
      run_knobs.overlap_grad_reduce = run.software.overlap_grad_reduce.value_or(
          overlaps_grad_reduce_by_default(run.software.framework));
      run_knobs.tp_comm_overlap = overlaps_tp_comm(run.software, run_knobs.sequence_parallel);
      run_knobs.ep_comm_overlap = run.software.ep_comm_overlap.value_or(false) &&
                                  run_knobs.mesh.ep * run_knobs.mesh.etp > 1;
      run_knobs.attention = run.software.attention.value_or(schemas::AttentionKernel::flash);
      if (run.software.gradient_dtype &&
          !schemas::allows_gradient_dtype(run_knobs.precision, *run.software.gradient_dtype)) {
        (location / "software" / "gradient_dtype")
            .fail(fmt::format(
                "{} with precision {}: gradients are the precision's default ({}), bf16 under "
                "bf16 and the quantised precisions, or fp32 under fp16",
                schemas::name_of(*run.software.gradient_dtype, schemas::kDtypeNames),
                schemas::name_of(run_knobs.precision, schemas::kDtypeNames),
                schemas::name_of(schemas::default_gradient_dtype(run_knobs.precision),
                                 schemas::kDtypeNames)));
      }
      run_knobs.gradient_dtype = run.software.gradient_dtype;
      run_knobs.cuda_graph_scope = run.software.cuda_graph_scope;
      run_knobs.framework =
          run.software.framework.value_or(schemas::TrainingFramework::megatron_lm);
      run.plan = schemas::build_plan(*model, cluster, run_knobs, source);
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace strata::simulator
