#include "strata/executor/checkpoint/checkpoint_state_check.h"

#include <fmt/format.h>

#include <boost/crc.hpp>
#include <regex>
#include <set>

#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/sharded_checkpoint.h"
#include "strata/executor/model/transformer.h"
#include "strata/layout/state_layout.h"
#include "strata/schemas/json_location.h"
#include "strata/schemas/object_reader.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_set.h"

namespace strata::executor {
namespace {

using nlohmann::json;
using schemas::JsonLocation;

// A plan's limit on each mesh axis holds for the whole mesh too (docs/commands.md, "Limits").
constexpr std::int64_t kMaxMeshAxis = schemas::kMaxMeshAxisSize;
constexpr std::int64_t kMaxSteps = schemas::kMaxTrainingSteps;      // strata train --steps
constexpr std::int64_t kMaxBucketElements = std::int64_t{1} << 40;  // --bucket-size
constexpr std::int64_t kMaxFileBytes = std::int64_t{1} << 50;

void check_file_entries(const json& files, const JsonLocation& where) {
  schemas::require_object(files, where);
  static const std::regex kFileName(R"([A-Za-z0-9_.]+)");
  static const std::regex kCrc(R"([0-9a-f]{8})");
  for (const auto& [name, entry] : files.items()) {
    const JsonLocation at = where / name;
    if (!std::regex_match(name, kFileName) || name.front() == '.') {
      at.fail("not a checkpoint file's name (letters, digits, '_' and '.', inside the directory)");
    }
    const schemas::ObjectReader reader(entry, at, {"bytes", "crc32"});
    reader.integer("bytes", {0, kMaxFileBytes});
    if (!std::regex_match(reader.string("crc32"), kCrc)) {
      at.fail("crc32 must be 8 lower-case hex digits");
    }
  }
}

// The run a checkpoint belongs to (version 2): what a resume compares with its own.
void check_run_block(const json& run, const JsonLocation& where) {
  const schemas::ObjectReader reader(
      run, where, {"global_batch_size", "seq_length", "precision", "data", "plan_hash"});
  reader.integer("global_batch_size", {1, std::numeric_limits<std::int64_t>::max()});
  reader.integer("seq_length", {1, std::numeric_limits<std::int64_t>::max()});
  reader.string("precision");
  reader.string("plan_hash");
  const schemas::ObjectReader data(reader.object("data"), reader.at("data"),
                                   {"file", "tokens", "crc32", "order"});
  data.string("file");
  data.integer("tokens", {0, std::numeric_limits<std::int64_t>::max()});
  data.string("crc32");
  data.optional_string("order");
}

void check_parallel_block(const json& parallel, const JsonLocation& where) {
  const schemas::ObjectReader reader(parallel, where,
                                     {"mesh", "zero_stage", "bucket_elements", "stages"});
  const schemas::ObjectReader mesh(reader.object("mesh"), reader.at("mesh"),
                                   {"tp", "cp", "dp", "pp", "order", "dp_shard", "ep", "etp"});
  __int128 world = 1;
  for (const char* axis : {"tp", "cp", "dp", "pp"}) world *= mesh.integer(axis, {1, kMaxMeshAxis});
  if (world > kMaxMeshAxis) {
    reader.at("mesh").fail(fmt::format(
        "tp × cp × dp × pp = {} ranks: more than Strata's limit of {}", world, kMaxMeshAxis));
  }
  schemas::parse_mesh_order(mesh);
  const std::int64_t dp = mesh.value("dp").get<std::int64_t>();
  if (const std::optional<std::int64_t> shard = mesh.optional_integer("dp_shard", {1, dp})) {
    if (dp % *shard != 0) {
      mesh.at("dp_shard").fail(fmt::format("{} does not divide dp={}", *shard, dp));
    }
  }
  const std::int64_t zero_stage = reader.integer("zero_stage", {0, 3});
  const std::int64_t ep = mesh.optional_integer("ep", {1, kMaxMeshAxis}).value_or(1);
  const std::int64_t etp = mesh.optional_integer("etp", {1, kMaxMeshAxis}).value_or(1);
  if (ep * etp > 1) {
    // Experts fold over each stage's tp × cp × dp ranks.
    const std::int64_t stage_ranks =
        mesh.value("tp").get<std::int64_t>() * mesh.value("cp").get<std::int64_t>() * dp;
    if (stage_ranks % (ep * etp) != 0) {
      mesh.at(ep > 1 ? "ep" : "etp")
          .fail(fmt::format("ep × etp = {} × {} does not divide tp × cp × dp = {}: the expert "
                            "mesh folds over each pipeline stage's ranks",
                            ep, etp, stage_ranks));
    }
    // Expert state is sharded into the dense state's replicas (hybrid sharding): their count
    // must divide the expert data-parallel size.
    const std::int64_t shard = mesh.optional_integer("dp_shard", {1, dp}).value_or(dp);
    const std::int64_t replicas = dp / shard;
    const std::int64_t expert_dp = stage_ranks / (ep * etp);
    if (zero_stage > 0 && expert_dp % replicas != 0) {
      mesh.at(ep > 1 ? "ep" : "etp")
          .fail(fmt::format("dp / dp_shard = {} replicas do not divide the expert data-parallel "
                            "size tp·cp·dp / (ep·etp) = {}: expert state is sharded into the "
                            "same replicas",
                            replicas, expert_dp));
    }
  }
  reader.integer("bucket_elements", {1, kMaxBucketElements});
  const std::int64_t pp = mesh.value("pp").get<std::int64_t>();
  if (pp > 1 && !reader.has("stages")) {
    reader.at("stages").fail(fmt::format("missing: a layout with pp = {} records its stages", pp));
  }
  if (pp == 1 && reader.has("stages")) {
    reader.at("stages").fail("given, but pp = 1: only a pipeline records its stages");
  }
  if (!reader.has("stages")) return;
  const json& stages = reader.array("stages", 1);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const JsonLocation at = reader.at("stages") / s;
    schemas::require_array(stages[s], at, 4);
    if (stages[s].size() != 4) at.fail("a stage is [first_layer, num_layers, embedding, lm_head]");
    schemas::read_integer(stages[s][0], at / 0, {0, kMaxMeshAxis});
    schemas::read_integer(stages[s][1], at / 1, {0, kMaxMeshAxis});
    for (std::size_t flag : {2, 3}) {
      if (!stages[s][flag].is_boolean()) (at / flag).fail("must be true or false");
    }
  }
}

std::vector<schemas::PipelineStage> recorded_stages(const json& parallel) {
  std::vector<schemas::PipelineStage> stages;
  for (const json& stage : parallel.at("stages")) {
    stages.push_back({stage[0].get<std::int64_t>(), stage[1].get<std::int64_t>(),
                      stage[2].get<bool>(), stage[3].get<bool>()});
  }
  return stages;
}

// The bytes state.json records for `name`, which the layout says a rank writes.
void expect_file(const json& files, const std::string& name, std::int64_t elements,
                 const JsonLocation& where, const std::string& layout_text) {
  if (!files.contains(name)) {
    where.fail(fmt::format("no entry for {}, which a layout of {} writes", name, layout_text));
  }
  const std::int64_t recorded = files.at(name).at("bytes").get<std::int64_t>();
  const std::int64_t implied = elements * static_cast<std::int64_t>(sizeof(float));
  if (recorded != implied) {
    (where / name)
        .fail(fmt::format("{} bytes recorded, but a layout of {} makes this file {} bytes",
                          recorded, layout_text, implied));
  }
}

}  // namespace

std::string checkpoint_state_checksum(json document) {
  document.erase(kCheckpointStateChecksumKey);
  const std::string text = document.dump();
  boost::crc_32_type crc;
  crc.process_bytes(text.data(), text.size());
  return fmt::format("{:08x}", crc.checksum());
}

void check_checkpoint_state(const json& state, const std::string& source) {
  const JsonLocation root(source);
  schemas::require_object(state, root);
  if (!state.contains("format") || state.at("format") != kCheckpointFormat) {
    (root / "format").fail(fmt::format("not a {} file", kCheckpointFormat));
  }
  if (!state.contains("version") || !state.at("version").is_number_integer()) {
    (root / "version").fail("missing or not an integer");
  }
  const std::int64_t version = state.at("version").get<std::int64_t>();
  if (version < 1 || version > kCheckpointVersion) {
    (root / "version")
        .fail(fmt::format("{}: this build reads checkpoint versions 1 to {}", version,
                          kCheckpointVersion));
  }
  // Whatever version the document claims, a checksum it carries is checked: editing the version
  // down to one without checksums must not switch the check off.
  const JsonLocation checksum_at = root / kCheckpointStateChecksumKey;
  if (state.contains(kCheckpointStateChecksumKey)) {
    if (!state.at(kCheckpointStateChecksumKey).is_string()) checksum_at.fail("must be a string");
    const std::string recorded = state.at(kCheckpointStateChecksumKey).get<std::string>();
    const std::string actual = checkpoint_state_checksum(state);
    if (recorded != actual) {
      checksum_at.fail(fmt::format("CRC-32 {} differs from the recorded {} (edited or corrupted)",
                                   actual, recorded));
    }
  } else if (version >= 2) {
    checksum_at.fail(
        fmt::format("missing: version {} checkpoints carry their own CRC-32", version));
  }
  const auto integer = [&](const char* key, schemas::IntegerRange range) {
    if (!state.contains(key)) (root / key).fail("missing");
    return schemas::read_integer(state.at(key), root / key, range);
  };
  integer("step", {0, kMaxSteps});
  integer("tokens_seen", {0, std::numeric_limits<std::int64_t>::max()});
  if (!state.contains("seed") || !state.at("seed").is_number_unsigned()) {
    (root / "seed").fail("missing or not a non-negative integer");
  }
  if (state.contains("run_id")) {
    const json& run_id = state.at("run_id");
    static const std::regex kRunId("[0-9a-f]{16}");
    if (!run_id.is_string() || !std::regex_match(run_id.get<std::string>(), kRunId)) {
      (root / "run_id").fail("must be 16 lowercase hex digits (the run that wrote it)");
    }
  }
  for (const char* key : {"model", "parameters", "files"}) {
    if (!state.contains(key)) (root / key).fail("missing");
  }
  // The model is compared with the one to train, field by field, after these checks.
  schemas::require_object(state.at("model"), root / "model");
  const schemas::ObjectReader parameters(state.at("parameters"), root / "parameters",
                                         {"count", "dtype", "layout"});
  parameters.integer("count", {0, std::numeric_limits<std::int64_t>::max()});
  parameters.string("dtype");
  parameters.array("layout", 0);
  if (state.contains("run")) check_run_block(state.at("run"), root / "run");
  check_file_entries(state.at("files"), root / "files");
  if (state.contains("parallel")) check_parallel_block(state.at("parallel"), root / "parallel");
}

void check_checkpoint_layout(const json& state, const schemas::ModelConfig& model,
                             const std::string& source) {
  const JsonLocation root(source);
  const json& files = state.at("files");
  std::int64_t parameters = 0;
  for (const ParameterSpec& spec : transformer_parameters(model)) {
    parameters += shape_numel(spec.shape);
  }
  if (!state.contains("parallel")) {
    if (files.size() != 2) {
      (root / "files")
          .fail(fmt::format("{} files; one device's checkpoint has model.bin and "
                            "optimizer.bin",
                            files.size()));
    }
    expect_file(files, "model.bin", parameters, root / "files", "one device");
    expect_file(files, "optimizer.bin", 2 * parameters, root / "files", "one device");
    return;
  }
  const json& parallel = state.at("parallel");
  const JsonLocation where = root / "parallel";
  schemas::Mesh mesh = layout::mesh_from_json(parallel.at("mesh"));
  if (parallel.contains("stages")) {
    const std::vector<schemas::PipelineStage> stages = recorded_stages(parallel);
    if (static_cast<std::int64_t>(stages.size()) % mesh.pp != 0) {
      (where / "stages")
          .fail(fmt::format("{} stages for pp = {}: a multiple of pp is needed", stages.size(),
                            mesh.pp));
    }
    mesh.vpp = static_cast<std::int64_t>(stages.size()) / mesh.pp;
    schemas::validate_mesh_for_model(mesh, model, where / "mesh");
    schemas::validate_pipeline_stages(stages, mesh, model.num_layers, where / "stages");
  } else {
    schemas::validate_mesh_for_model(mesh, model, where / "mesh");
  }
  const std::int64_t zero_stage = parallel.at("zero_stage").get<std::int64_t>();
  const std::string layout_text = fmt::format(
      "tp {} · cp {} · dp {}{}{}{} · pp {}, ZeRO-{}", mesh.tp, mesh.cp, mesh.dp,
      mesh.zero_shard_dp() < mesh.dp ? fmt::format(" (shards of {})", mesh.dp_shard) : "",
      mesh.ep > 1 ? fmt::format(" · ep {}", mesh.ep) : "",
      mesh.etp > 1 ? fmt::format(" · etp {}", mesh.etp) : "", mesh.pp, zero_stage);
  // Values files: one per (tp, pp) rank per ZeRO shard (its place in a shard group of
  // dp_shard × cp ranks) too under ZeRO-3; moments per shard under ZeRO ≥ 1. Under expert
  // parallelism, the names the writers give them: one per (tp, pp, ep) held together by a rank
  // (the ep group may fold over tp ranks), per expert shard when sharded.
  // The block is checked: from here on the layout is read as what it is.
  const layout::StateLayout recorded = *layout::state_layout_from_json(parallel);
  __int128 implied_files = 0;
  if (mesh.ep * mesh.etp > 1) {
    std::set<std::string> names;
    for (const std::int64_t rank : checkpoint_writer_ranks(recorded)) {
      const ShardedCheckpointPart part =
          sharded_checkpoint_files(recorded.mesh, recorded.zero_stage, rank);
      if (part.writes_values) names.insert(part.values_file);
      if (part.writes_moments) names.insert(part.moments_file);
    }
    implied_files = static_cast<__int128>(names.size());
  } else {
    const __int128 per_model_rank = static_cast<__int128>(mesh.tp) * mesh.pp;
    const __int128 shards = static_cast<__int128>(mesh.zero_shard_dp()) * mesh.cp;
    implied_files = per_model_rank * (zero_stage >= 3 ? shards : 1) +
                    per_model_rank * (zero_stage >= 1 ? shards : 1);
  }
  if (implied_files != static_cast<__int128>(files.size())) {
    (root / "files")
        .fail(fmt::format("{} files, but a layout of {} writes {}", files.size(), layout_text,
                          static_cast<std::int64_t>(implied_files)));
  }
  for (const std::int64_t rank : checkpoint_writer_ranks(recorded)) {
    const RankCheckpointLayout layout = rank_checkpoint_layout(model, recorded, rank);
    if (layout.writes_values) {
      expect_file(files, layout.values_file, layout.values_elements, root / "files", layout_text);
    }
    if (layout.writes_moments) {
      expect_file(files, layout.moments_file, 2 * layout.moments_elements, root / "files",
                  layout_text);
    }
  }
}

}  // namespace strata::executor
