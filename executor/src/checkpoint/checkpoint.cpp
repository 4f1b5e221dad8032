#include "strata/executor/checkpoint/checkpoint.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::executor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "strata-checkpoint";
// 2 adds the run identity and state.json's own CRC-32; version 1 checkpoints are still read.
constexpr int kVersion = 2;
constexpr const char* kStateChecksum = "state_crc32";

std::uint32_t crc32_of(const void* data, std::size_t bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(data, bytes);
  return crc.checksum();
}

std::string hex(std::uint32_t value) { return fmt::format("{:08x}", value); }

json file_entry(const void* data, std::size_t bytes) {
  return json{{"bytes", bytes}, {"crc32", hex(crc32_of(data, bytes))}};
}

void write_binary(const fs::path& path, std::initializer_list<const Tensor*> tensors) {
  std::string contents;
  for (const Tensor* tensor : tensors) {
    contents.append(static_cast<const char*>(tensor->raw()), tensor->bytes());
  }
  schemas::write_file_atomically(path, contents);
}

// The CRC-32 of a state document without its own checksum field (keys are sorted in the dump).
std::string state_checksum(json document) {
  document.erase(kStateChecksum);
  const std::string text = document.dump();
  return hex(crc32_of(text.data(), text.size()));
}

json run_to_json(const RunIdentity& run) {
  return json{
      {"global_batch_size", run.global_batch_size},
      {"seq_length", run.seq_length},
      {"precision", run.precision},
      {"data", {{"file", run.data_file}, {"tokens", run.data_tokens}, {"crc32", run.data_crc32}}},
      {"plan_hash", run.plan_hash}};
}

RunIdentity run_from_json(const json& run) {
  return RunIdentity{run.at("global_batch_size").get<std::int64_t>(),
                     run.at("seq_length").get<std::int64_t>(),
                     run.at("precision").get<std::string>(),
                     run.at("data").at("tokens").get<std::int64_t>(),
                     run.at("data").at("crc32").get<std::string>(),
                     run.at("data").at("file").get<std::string>(),
                     run.at("plan_hash").get<std::string>()};
}

json parameter_layout(const ParameterStore& parameters) {
  json layout = json::array();
  for (const ParameterEntry& entry : parameters.entries()) {
    layout.push_back(json{{"name", entry.spec.name}, {"shape", entry.spec.shape}});
  }
  return layout;
}

// The tensor in host memory: itself, or a copy of a device tensor (checkpoints hold host bytes,
// so a GPU run's checkpoint resumes on the CPU and back).
Tensor on_host(const Tensor& tensor) {
  return tensor.device() == Device::cpu ? tensor : tensor.to(Device::cpu);
}

// Reads `name` from the checkpoint into `tensors` (in order), after checking size and CRC.
void read_binary(const fs::path& checkpoint, const json& state, const char* name,
                 std::initializer_list<Tensor*> tensors) {
  const fs::path path = checkpoint / name;
  const std::string source = path.string();
  if (!fs::exists(path)) throw schemas::InputError(source, "", "missing from the checkpoint");
  const json& entry = state.at("files").at(name);
  const std::size_t expected_bytes = entry.at("bytes").get<std::size_t>();
  std::size_t wanted = 0;
  for (const Tensor* tensor : tensors) wanted += tensor->bytes();
  const std::size_t actual = fs::file_size(path);
  if (actual != expected_bytes) {
    throw schemas::InputError(source, "",
                              fmt::format("{} bytes, state.json says {} (truncated or replaced)",
                                          actual, expected_bytes));
  }
  if (actual != wanted) {
    throw schemas::InputError(
        source, "", fmt::format("{} bytes, the model's parameters need {}", actual, wanted));
  }
  std::string contents = schemas::read_text_file(path);
  const std::string crc = hex(crc32_of(contents.data(), contents.size()));
  if (crc != entry.at("crc32").get<std::string>()) {
    throw schemas::InputError(source, "",
                              fmt::format("CRC-32 {} differs from state.json's {} (corrupted)", crc,
                                          entry.at("crc32").get<std::string>()));
  }
  std::size_t offset = 0;
  for (Tensor* tensor : tensors) {
    const Tensor bytes = Tensor::borrow(contents.data() + offset, tensor->shape(),
                                        tensor->scalar_type(), Device::cpu);
    tensor->copy_from(bytes);
    offset += tensor->bytes();
  }
}

}  // namespace

fs::path write_checkpoint(const fs::path& directory, const schemas::ModelConfig& model,
                          const ParameterStore& parameters, const OptimizerMoments& moments,
                          const TrainingState& state) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    throw schemas::InputError(directory.string(), "", "cannot create: " + error.message());
  }
  const std::string name = fmt::format("step_{:08d}", state.step);
  const fs::path final_path = directory / name;
  const fs::path temporary =
      directory / fmt::format(".{}.tmp.{}", name, static_cast<long>(::getpid()));
  remove_abandoned_checkpoints(directory);
  fs::remove_all(temporary);
  fs::create_directory(temporary);
  const Tensor values = on_host(parameters.values());
  const Tensor first_moments = on_host(moments.first);
  const Tensor second_moments = on_host(moments.second);
  write_binary(temporary / "model.bin", {&values});
  write_binary(temporary / "optimizer.bin", {&first_moments, &second_moments});
  std::string optimizer_bytes(static_cast<const char*>(first_moments.raw()), first_moments.bytes());
  optimizer_bytes.append(static_cast<const char*>(second_moments.raw()), second_moments.bytes());
  json document{{"format", kFormat},
                {"version", kVersion},
                {"step", state.step},
                {"seed", state.seed},
                {"tokens_seen", state.tokens_seen},
                {"data",
                 {{"next_step", state.step},
                  {"sampler", "window starts drawn from (seed, step, sample index)"}}},
                {"model", schemas::model_to_json(model)},
                {"parameters",
                 {{"count", parameters.total_elements()},
                  {"dtype", scalar_type_name(parameters.values().scalar_type())},
                  {"layout", parameter_layout(parameters)}}},
                {"files",
                 {{"model.bin", file_entry(values.raw(), values.bytes())},
                  {"optimizer.bin", file_entry(optimizer_bytes.data(), optimizer_bytes.size())}}}};
  if (state.run) document["run"] = run_to_json(*state.run);
  document[kStateChecksum] = state_checksum(document);
  schemas::write_file_atomically(temporary / "state.json", document.dump(2) + "\n");
  fs::remove_all(final_path);
  fs::rename(temporary, final_path, error);
  if (error) {
    fs::remove_all(temporary);
    throw schemas::InputError(final_path.string(), "",
                              "cannot rename into place: " + error.message());
  }
  return final_path;
}

void remove_abandoned_checkpoints(const fs::path& directory) {
  static const std::regex kTemporary(R"(\.step_[0-9]{8}\.tmp\.([0-9]+))");
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, error)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, match, kTemporary)) continue;
    const long pid = std::stol(match[1].str());
    // kill(pid, 0) fails with ESRCH when no such process exists: its writer died mid-write.
    if (pid != static_cast<long>(::getpid()) && ::kill(static_cast<pid_t>(pid), 0) != 0 &&
        errno == ESRCH) {
      fs::remove_all(entry.path(), error);
    }
  }
}

std::optional<fs::path> latest_checkpoint(const fs::path& directory) {
  if (!fs::is_directory(directory)) return std::nullopt;
  static const std::regex kName("step_[0-9]{8}");
  std::optional<fs::path> latest;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !std::regex_match(name, kName)) continue;
    if (!latest || name > latest->filename().string()) latest = entry.path();
  }
  return latest;
}

TrainingState read_checkpoint(const fs::path& checkpoint, const schemas::ModelConfig& model,
                              ParameterStore& parameters, OptimizerMoments& moments) {
  const fs::path state_path = checkpoint / "state.json";
  if (!fs::exists(state_path)) {
    throw schemas::InputError(checkpoint.string(), "", "not a checkpoint: state.json is missing");
  }
  const json state = schemas::read_json_file(state_path);
  const std::string source = state_path.string();
  try {
    const int version =
        state.at("version").is_number_integer() ? state.at("version").get<int>() : 0;
    if (state.at("format") != kFormat || version < 1 || version > kVersion) {
      throw schemas::InputError(source, "/format",
                                fmt::format("not a {} file of version 1 to {}", kFormat, kVersion));
    }
    if (version >= 2) {
      const std::string recorded = state.at(kStateChecksum).get<std::string>();
      const std::string actual = state_checksum(state);
      if (recorded != actual) {
        throw schemas::InputError(
            source, "/" + std::string(kStateChecksum),
            fmt::format("CRC-32 {} differs from the recorded {} (edited or corrupted)", actual,
                        recorded));
      }
    }
    const std::int64_t step = state.at("step").get<std::int64_t>();
    const std::string expected_name = fmt::format("step_{:08d}", step);
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
    if (state.at("parameters").at("layout") != parameter_layout(parameters) ||
        state.at("parameters").at("dtype") != scalar_type_name(parameters.values().scalar_type())) {
      throw schemas::InputError(source, "/parameters",
                                "parameter names, shapes or dtype differ from the model's");
    }
    read_binary(checkpoint, state, "model.bin", {&parameters.values()});
    read_binary(checkpoint, state, "optimizer.bin", {&moments.first, &moments.second});
    parameters.refresh_compute_values();
    TrainingState result{step, state.at("seed").get<std::uint64_t>(),
                         state.at("tokens_seen").get<std::int64_t>(), std::nullopt};
    if (state.contains("run")) result.run = run_from_json(state.at("run"));
    return result;
  } catch (const json::exception& error) {
    throw schemas::InputError(source, "",
                              fmt::format("malformed checkpoint state: {}", error.what()));
  }
}

}  // namespace strata::executor
