#include "strata/executor/checkpoint/checkpoint_state.h"

#include <fmt/format.h>

#include <random>

#include "state_document.h"
#include "strata/executor/checkpoint/checkpoint_directory.h"
#include "strata/executor/checkpoint/checkpoint_state_check.h"
#include "strata/executor/model/transformer.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::executor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json run_to_json(const RunIdentity& run) {
  return json{{"global_batch_size", run.global_batch_size},
              {"seq_length", run.seq_length},
              {"precision", run.precision},
              {"data",
               {{"file", run.data_file},
                {"tokens", run.data_tokens},
                {"crc32", run.data_crc32},
                {"order", run.data_order}}},
              {"plan_hash", run.plan_hash}};
}

RunIdentity run_from_json(const json& run) {
  const json& data = run.at("data");
  return RunIdentity{run.at("global_batch_size").get<std::int64_t>(),
                     run.at("seq_length").get<std::int64_t>(),
                     run.at("precision").get<std::string>(),
                     data.at("tokens").get<std::int64_t>(),
                     data.at("crc32").get<std::string>(),
                     data.at("file").get<std::string>(),
                     run.at("plan_hash").get<std::string>(),
                     data.contains("order") ? data.at("order").get<std::string>() : "random"};
}

// Names and shapes of parameters, in order, and their element count.
struct ParameterLayout {
  json layout = json::array();
  std::int64_t count = 0;
  void add(const ParameterSpec& spec) {
    layout.push_back(json{{"name", spec.name}, {"shape", spec.shape}});
    count += shape_numel(spec.shape);
  }
};

// The store's own parameters (one device holds the whole model).
ParameterLayout store_layout(const ParameterStore& parameters) {
  ParameterLayout store;
  for (const ParameterEntry& entry : parameters.entries()) store.add(entry.spec);
  return store;
}

// The whole model's: a parallel checkpoint records it whatever part of it (pipeline stages, tp
// slices) the writing rank holds.
ParameterLayout whole_layout(const schemas::ModelConfig& model) {
  ParameterLayout whole;
  for (const ParameterSpec& spec : transformer_parameters(model)) whole.add(spec);
  return whole;
}

// state.json of `checkpoint`, parsed, or a one-line refusal of a directory without one.
json read_state_json(const fs::path& checkpoint) {
  const fs::path state_path = checkpoint / "state.json";
  if (!fs::exists(state_path)) {
    throw schemas::InputError(checkpoint.string(), "", "not a checkpoint: state.json is missing");
  }
  return schemas::read_json_file(state_path);
}

}  // namespace

std::string new_run_id() {
  std::random_device source;
  const std::uint64_t id = (static_cast<std::uint64_t>(source()) << 32) ^ source();
  return fmt::format("{:016x}", id);
}

json state_document(const schemas::ModelConfig& model, const ParameterStore& parameters,
                    const TrainingState& state, json files, json parallel) {
  const ParameterLayout layout =
      parallel.is_null() ? store_layout(parameters) : whole_layout(model);
  json document{{"format", kCheckpointFormat},
                {"version", kCheckpointVersion},
                {"step", state.step},
                {"seed", state.seed},
                {"tokens_seen", state.tokens_seen},
                {"data",
                 {{"next_step", state.step},
                  {"sampler", "window starts drawn from (seed, step, sample index)"}}},
                {"model", schemas::model_to_json(model)},
                {"parameters",
                 {{"count", layout.count},
                  {"dtype", scalar_type_name(parameters.scalar_type())},
                  {"layout", layout.layout}}},
                {"files", std::move(files)}};
  if (!parallel.is_null()) document["parallel"] = std::move(parallel);
  if (state.run) document["run"] = run_to_json(*state.run);
  if (!state.run_id.empty()) document["run_id"] = state.run_id;
  document[kCheckpointStateChecksumKey] = checkpoint_state_checksum(document);
  return document;
}

json verified_state(const fs::path& checkpoint, const schemas::ModelConfig& model,
                    const ParameterStore& parameters, bool parallel) {
  const json state = read_state_json(checkpoint);
  const std::string source = (checkpoint / "state.json").string();
  check_checkpoint_state(state, source);
  const std::int64_t step = state.at("step").get<std::int64_t>();
  const std::string expected_name = checkpoint_directory_name(step);
  if (checkpoint.filename() != expected_name) {
    throw schemas::InputError(source, "/step",
                              fmt::format("{} belongs in a directory {}, not {}", step,
                                          expected_name, checkpoint.filename().string()));
  }
  const json expected_model = schemas::model_to_json(model);
  for (const auto& [key, value] : expected_model.items()) {
    if (!state.at("model").contains(key) || state.at("model").at(key) != value) {
      throw schemas::InputError(
          source, "/model/" + key,
          fmt::format("the checkpoint's model has {}, the model to train has {}",
                      state.at("model").value(key, json()).dump(), value.dump()));
    }
  }
  const json expected_layout =
      parallel ? whole_layout(model).layout : store_layout(parameters).layout;
  if (state.at("parameters").at("layout") != expected_layout ||
      state.at("parameters").at("dtype") != scalar_type_name(parameters.scalar_type())) {
    throw schemas::InputError(source, "/parameters",
                              "parameter names, shapes or dtype differ from the model's");
  }
  check_checkpoint_layout(state, model, source);
  return state;
}

TrainingState training_state_of(const json& state) {
  TrainingState result{state.at("step").get<std::int64_t>(), state.at("seed").get<std::uint64_t>(),
                       state.at("tokens_seen").get<std::int64_t>(), std::nullopt, ""};
  if (state.contains("run")) result.run = run_from_json(state.at("run"));
  if (state.contains("run_id")) result.run_id = state.at("run_id").get<std::string>();
  return result;
}

schemas::ModelConfig read_checkpoint_model(const fs::path& checkpoint) {
  const json state = read_state_json(checkpoint);
  const std::string source = (checkpoint / "state.json").string();
  if (!state.contains("model")) {
    throw schemas::InputError(source, "/model", "missing: no model recorded");
  }
  return schemas::parse_model(state.at("model"), schemas::JsonLocation{source, "/model"});
}

std::optional<layout::StateLayout> recorded_checkpoint_layout(const fs::path& checkpoint) {
  const json state = read_state_json(checkpoint);
  check_checkpoint_state(state, (checkpoint / "state.json").string());
  return layout::state_layout_from_json(state.contains("parallel") ? state.at("parallel") : json());
}

std::string checkpoint_layout_text(const std::optional<layout::StateLayout>& state_layout) {
  if (!state_layout) return "one device";
  const schemas::Mesh& mesh = state_layout->mesh;
  return fmt::format("tp {} · cp {} · dp {}{}{} · pp {} ({}), ZeRO-{}, buckets of {}", mesh.tp,
                     mesh.cp, mesh.dp,
                     mesh.dp_shard > 0 ? fmt::format(" (shards of {})", mesh.dp_shard) : "",
                     mesh.ep > 1 ? fmt::format(" · ep {}", mesh.ep) : "", mesh.pp,
                     schemas::mesh_order_to_string(mesh.order), state_layout->zero_stage,
                     state_layout->bucket_elements);
}

}  // namespace strata::executor
