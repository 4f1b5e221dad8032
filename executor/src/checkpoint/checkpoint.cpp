#include "strata/executor/checkpoint/checkpoint.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <boost/crc.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <string>

#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/checkpoint_state_check.h"
#include "strata/executor/distributed/typed_collectives.h"
#include "strata/executor/model/transformer.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::executor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::uint32_t crc32_of(const void* data, std::size_t bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(data, bytes);
  return crc.checksum();
}

std::string hex(std::uint32_t value) { return fmt::format("{:08x}", value); }

json file_entry(const void* data, std::size_t bytes) {
  return json{{"bytes", bytes}, {"crc32", hex(crc32_of(data, bytes))}};
}

// Writes the tensors one after another and returns the file's entry in state.json.
json write_binary(const fs::path& path, const std::vector<const Tensor*>& tensors) {
  std::string contents;
  for (const Tensor* tensor : tensors) {
    contents.append(static_cast<const char*>(tensor->raw()), tensor->bytes());
  }
  schemas::write_file_atomically(path, contents);
  return file_entry(contents.data(), contents.size());
}

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

// The whole model's parameter count (a parallel rank's store holds slices of it).
std::int64_t total_parameters(const ParameterStore& parameters) {
  std::int64_t count = 0;
  for (const ParameterEntry& entry : parameters.entries()) count += shape_numel(entry.spec.shape);
  return count;
}

json parameter_layout(const ParameterStore& parameters) {
  json layout = json::array();
  for (const ParameterEntry& entry : parameters.entries()) {
    layout.push_back(json{{"name", entry.spec.name}, {"shape", entry.spec.shape}});
  }
  return layout;
}

// A parallel checkpoint records the whole model's layout, whatever part of it (pipeline stages,
// tp slices) the writing rank holds.
struct WholeLayout {
  json layout;
  std::int64_t count = 0;
};
WholeLayout whole_layout(const schemas::ModelConfig& model) {
  WholeLayout whole{json::array(), 0};
  for (const ParameterSpec& spec : transformer_parameters(model)) {
    whole.layout.push_back(json{{"name", spec.name}, {"shape", spec.shape}});
    whole.count += shape_numel(spec.shape);
  }
  return whole;
}

// The tensor in host memory: itself, or a copy of a device tensor (checkpoints hold host bytes,
// so a GPU run's checkpoint resumes on the CPU and back).
Tensor on_host(const Tensor& tensor) {
  return tensor.device() == Device::cpu ? tensor : tensor.to(Device::cpu);
}

// Reads `name` from the checkpoint into `tensors` (in order), after checking size and CRC.
void read_binary(const fs::path& checkpoint, const json& state, const std::string& name,
                 const std::vector<Tensor*>& tensors) {
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

fs::path checkpoint_name(std::int64_t step) { return fmt::format("step_{:08d}", step); }

// DIR/.step_N.tmp.PID, fresh, after clearing what killed writers left.
fs::path create_temporary(const fs::path& directory, std::int64_t step, long writer_pid) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    throw schemas::InputError(directory.string(), "", "cannot create: " + error.message());
  }
  const fs::path temporary =
      directory / fmt::format(".{}.tmp.{}", checkpoint_name(step).string(), writer_pid);
  remove_abandoned_checkpoints(directory);
  fs::remove_all(temporary);
  fs::create_directory(temporary);
  return temporary;
}

json state_document(const schemas::ModelConfig& model, const ParameterStore& parameters,
                    const TrainingState& state, json files, json parallel) {
  const bool whole_model = parallel.is_null();
  const WholeLayout whole =
      whole_model ? WholeLayout{parameter_layout(parameters), total_parameters(parameters)}
                  : whole_layout(model);
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
                 {{"count", whole.count},
                  {"dtype", scalar_type_name(parameters.scalar_type())},
                  {"layout", whole.layout}}},
                {"files", std::move(files)}};
  if (!parallel.is_null()) document["parallel"] = std::move(parallel);
  if (state.run) document["run"] = run_to_json(*state.run);
  if (!state.run_id.empty()) document["run_id"] = state.run_id;
  document[kCheckpointStateChecksumKey] = checkpoint_state_checksum(document);
  return document;
}

// Writes state.json into the temporary directory and renames it into place.
fs::path finish_checkpoint(const fs::path& directory, const fs::path& temporary, std::int64_t step,
                           const json& document) {
  schemas::write_file_atomically(temporary / "state.json", document.dump(2) + "\n");
  const fs::path final_path = directory / checkpoint_name(step);
  std::error_code error;
  fs::remove_all(final_path);
  fs::rename(temporary, final_path, error);
  if (error) {
    fs::remove_all(temporary);
    throw schemas::InputError(final_path.string(), "",
                              "cannot rename into place: " + error.message());
  }
  return final_path;
}

// state.json of a checkpoint after the checks every reader makes (checkpoint_state_check.h):
// format, version, its own CRC-32, types and ranges; the step against the directory's name; the
// model and the parameter layout; the recorded files against the parallel layout.
json verified_state(const fs::path& checkpoint, const schemas::ModelConfig& model,
                    const ParameterStore& parameters, bool parallel) {
  const fs::path state_path = checkpoint / "state.json";
  if (!fs::exists(state_path)) {
    throw schemas::InputError(checkpoint.string(), "", "not a checkpoint: state.json is missing");
  }
  const json state = schemas::read_json_file(state_path);
  const std::string source = state_path.string();
  check_checkpoint_state(state, source);
  const std::int64_t step = state.at("step").get<std::int64_t>();
  const fs::path expected_name = checkpoint_name(step);
  if (checkpoint.filename() != expected_name) {
    throw schemas::InputError(source, "/step",
                              fmt::format("{} belongs in a directory {}, not {}", step,
                                          expected_name.string(), checkpoint.filename().string()));
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
  const json expected_layout = parallel ? whole_layout(model).layout : parameter_layout(parameters);
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

std::string mesh_text(const json& layout) {
  const json& mesh = layout.at("mesh");
  return fmt::format("tp {} · cp {} · dp {} · pp {} ({}), ZeRO-{}, buckets of {}",
                     mesh.at("tp").get<std::int64_t>(), mesh.at("cp").get<std::int64_t>(),
                     mesh.at("dp").get<std::int64_t>(), mesh.at("pp").get<std::int64_t>(),
                     mesh.at("order").get<std::string>(),
                     layout.at("zero_stage").get<std::int64_t>(),
                     layout.at("bucket_elements").get<std::int64_t>());
}

}  // namespace

fs::path write_checkpoint(const fs::path& directory, const schemas::ModelConfig& model,
                          const ParameterStore& parameters, const OptimizerMoments& moments,
                          const TrainingState& state) {
  const fs::path temporary = create_temporary(directory, state.step, ::getpid());
  const Tensor values = on_host(parameters.values());
  const Tensor first_moments = on_host(moments.first);
  const Tensor second_moments = on_host(moments.second);
  json files{{"model.bin", write_binary(temporary / "model.bin", {&values})},
             {"optimizer.bin",
              write_binary(temporary / "optimizer.bin", {&first_moments, &second_moments})}};
  const json document = state_document(model, parameters, state, std::move(files), json());
  return finish_checkpoint(directory, temporary, state.step, document);
}

void remove_abandoned_checkpoints(const fs::path& directory) {
  static const std::regex kTemporary(R"(\.step_[0-9]{8,}\.tmp\.([0-9]+))");
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

std::vector<std::pair<std::int64_t, fs::path>> checkpoints_in(const fs::path& directory) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  if (!fs::is_directory(directory)) return found;
  // Eight digits or more: step 100,000,000 is step_100000000, which sorts after step_99999999 by
  // its number, not its name.
  static const std::regex kName("step_([0-9]{8,18})");
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    std::smatch match;
    if (!entry.is_directory() || !std::regex_match(name, match, kName)) continue;
    found.emplace_back(std::stoll(match[1].str()), entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::optional<fs::path> latest_checkpoint(const fs::path& directory) {
  const std::vector<std::pair<std::int64_t, fs::path>> found = checkpoints_in(directory);
  if (found.empty()) return std::nullopt;
  return found.back().second;
}

std::string new_run_id() {
  std::random_device source;
  const std::uint64_t id = (static_cast<std::uint64_t>(source()) << 32) ^ source();
  return fmt::format("{:016x}", id);
}

TrainingState read_checkpoint(const fs::path& checkpoint, const schemas::ModelConfig& model,
                              ParameterStore& parameters, OptimizerMoments& moments) {
  const std::string source = (checkpoint / "state.json").string();
  try {
    if (!recorded_checkpoint_layout(checkpoint).is_null()) {
      // Written by a parallel run: gather this one device's state from its files.
      const TrainingState resumed = read_resharded_checkpoint(
          checkpoint, model, json(), 0, {&parameters.values()}, {&moments.first, &moments.second});
      parameters.refresh_compute_values();
      return resumed;
    }
    const json state = verified_state(checkpoint, model, parameters, false);
    read_binary(checkpoint, state, "model.bin", {&parameters.values()});
    read_binary(checkpoint, state, "optimizer.bin", {&moments.first, &moments.second});
    parameters.refresh_compute_values();
    return training_state_of(state);
  } catch (const json::exception& error) {
    throw schemas::InputError(source, "",
                              fmt::format("malformed checkpoint state: {}", error.what()));
  }
}

ShardedCheckpointPart sharded_checkpoint_files(const json& mesh_json, std::int64_t zero_stage,
                                               std::int64_t rank) {
  const schemas::Mesh mesh = checkpoint_mesh(mesh_json);
  const schemas::MeshCoordinates at = schemas::mesh_coordinates(mesh, rank);
  const auto coordinate = [&](schemas::MeshAxis axis) {
    return at[static_cast<std::size_t>(axis)];
  };
  // Context-parallel ranks hold the same state as their dp peers.
  const bool first_replica =
      coordinate(schemas::MeshAxis::dp) == 0 && coordinate(schemas::MeshAxis::cp) == 0;
  const std::int64_t tp = coordinate(schemas::MeshAxis::tp);
  const std::int64_t pp = coordinate(schemas::MeshAxis::pp);
  const std::int64_t dp = coordinate(schemas::MeshAxis::dp);
  ShardedCheckpointPart part;
  part.rank = rank;
  const bool sharded_values = zero_stage >= 3;
  const bool sharded_moments = zero_stage >= 1;
  part.values_file = fmt::format("model.tp{}.pp{}.dp{}.bin", tp, pp, sharded_values ? dp : 0);
  part.moments_file = fmt::format("optimizer.tp{}.pp{}.dp{}.bin", tp, pp, sharded_moments ? dp : 0);
  part.writes_values = first_replica || (sharded_values && coordinate(schemas::MeshAxis::cp) == 0);
  part.writes_moments =
      first_replica || (sharded_moments && coordinate(schemas::MeshAxis::cp) == 0);
  return part;
}

ShardedCheckpointPart checkpoint_part_of(const json& layout, std::int64_t rank) {
  if (layout.is_null()) {
    ShardedCheckpointPart part;
    part.values_file = "model.bin";
    part.moments_file = "optimizer.bin";
    part.writes_values = part.writes_moments = true;
    return part;
  }
  ShardedCheckpointPart part = sharded_checkpoint_files(
      layout.at("mesh"), layout.at("zero_stage").get<std::int64_t>(), rank);
  part.layout = layout;
  return part;
}

fs::path write_sharded_checkpoint(const fs::path& directory, const schemas::ModelConfig& model,
                                  const ParameterStore& parameters,
                                  const ShardedCheckpointPart& part, const TrainingState& state,
                                  Communicator& world) {
  // Rank 0 makes the temporary directory and tells everyone its name (its PID).
  long writer_pid = 0;
  if (world.rank() == 0) {
    create_temporary(directory, state.step, ::getpid());
    writer_pid = static_cast<long>(::getpid());
  }
  writer_pid = broadcast_record(world, writer_pid, 0);
  const fs::path temporary =
      directory / fmt::format(".{}.tmp.{}", checkpoint_name(state.step).string(), writer_pid);
  // Each rank writes its pieces and reports, for each of the two, whether it wrote it and what.
  struct WrittenFile {
    bool written = false;
    std::uint64_t bytes = 0;
    std::uint32_t crc32 = 0;
  };
  struct WrittenFiles {
    WrittenFile values, moments;
  };
  WrittenFiles mine;
  const auto write = [&](const std::string& name, const std::vector<Tensor>& tensors,
                         WrittenFile& written) {
    std::vector<Tensor> host;
    for (const Tensor& tensor : tensors) host.push_back(on_host(tensor));
    std::vector<const Tensor*> pointers;
    for (const Tensor& tensor : host) pointers.push_back(&tensor);
    const json entry = write_binary(temporary / name, pointers);
    written = {
        true, entry.at("bytes").get<std::uint64_t>(),
        static_cast<std::uint32_t>(std::stoul(entry.at("crc32").get<std::string>(), nullptr, 16))};
  };
  if (part.writes_values) write(part.values_file, part.values, mine.values);
  if (part.writes_moments) write(part.moments_file, part.moments, mine.moments);
  const std::vector<WrittenFiles> everyone = all_gather_records(world, mine);
  int renamed = 0;
  std::string failure;
  if (world.rank() == 0) {
    json files = json::object();
    for (int rank = 0; rank < world.size(); ++rank) {
      const ShardedCheckpointPart names = checkpoint_part_of(part.layout, rank);
      const auto add = [&](const std::string& name, const WrittenFile& file) {
        if (!file.written) return;
        files[name] = json{{"bytes", file.bytes}, {"crc32", hex(file.crc32)}};
      };
      add(names.values_file, everyone[static_cast<std::size_t>(rank)].values);
      add(names.moments_file, everyone[static_cast<std::size_t>(rank)].moments);
    }
    try {
      finish_checkpoint(directory, temporary, state.step,
                        state_document(model, parameters, state, std::move(files), part.layout));
      renamed = 1;
    } catch (const schemas::InputError& error) {
      failure = error.what();
    }
  }
  renamed = broadcast_record(world, renamed, 0);
  const fs::path final_path = directory / checkpoint_name(state.step);
  if (renamed == 0) {
    throw schemas::InputError(
        final_path.string(), "",
        failure.empty() ? "rank 0 could not complete the checkpoint" : failure);
  }
  return final_path;
}

TrainingState read_sharded_checkpoint(const fs::path& checkpoint, const schemas::ModelConfig& model,
                                      const ParameterStore& parameters,
                                      ShardedCheckpointPart& part) {
  const std::string source = (checkpoint / "state.json").string();
  try {
    std::vector<Tensor*> values, moments;
    for (Tensor& tensor : part.values) values.push_back(&tensor);
    for (Tensor& tensor : part.moments) moments.push_back(&tensor);
    if (recorded_checkpoint_layout(checkpoint) != part.layout) {
      return read_resharded_checkpoint(checkpoint, model, part.layout, part.rank, values, moments);
    }
    const json state = verified_state(checkpoint, model, parameters, !part.layout.is_null());
    read_binary(checkpoint, state, part.values_file, values);
    read_binary(checkpoint, state, part.moments_file, moments);
    return training_state_of(state);
  } catch (const json::exception& error) {
    throw schemas::InputError(source, "",
                              fmt::format("malformed checkpoint state: {}", error.what()));
  }
}

namespace {

// One device's checkpoint seen as a parallel layout of one rank, its files renamed.
const json kOneDeviceLayout{
    {"mesh", {{"tp", 1}, {"cp", 1}, {"dp", 1}, {"pp", 1}, {"order", "tp-cp-dp-pp"}}},
    {"zero_stage", 0},
    {"bucket_elements", 1}};

std::int64_t world_of(const json& parallel) {
  const json& mesh = parallel.at("mesh");
  return mesh.at("tp").get<std::int64_t>() * mesh.at("cp").get<std::int64_t>() *
         mesh.at("dp").get<std::int64_t>() * mesh.at("pp").get<std::int64_t>();
}

// `parallel` null stands for one device.
RankCheckpointLayout layout_of(const schemas::ModelConfig& model, const json& parallel,
                               std::int64_t rank) {
  if (!parallel.is_null()) return rank_checkpoint_layout(model, parallel, rank);
  RankCheckpointLayout layout = rank_checkpoint_layout(model, kOneDeviceLayout, 0);
  layout.values_file = "model.bin";
  layout.moments_file = "optimizer.bin";
  return layout;
}

void check_file(const fs::path& checkpoint, const json& state, const std::string& name) {
  const fs::path path = checkpoint / name;
  const std::string source = path.string();
  if (!fs::exists(path)) throw schemas::InputError(source, "", "missing from the checkpoint");
  const json& entry = state.at("files").at(name);
  const std::size_t expected = entry.at("bytes").get<std::size_t>();
  const std::size_t actual = fs::file_size(path);
  if (actual != expected) {
    throw schemas::InputError(
        source, "",
        fmt::format("{} bytes, state.json says {} (truncated or replaced)", actual, expected));
  }
  const std::string contents = schemas::read_text_file(path);
  const std::string crc = hex(crc32_of(contents.data(), contents.size()));
  if (crc != entry.at("crc32").get<std::string>()) {
    throw schemas::InputError(source, "",
                              fmt::format("CRC-32 {} differs from state.json's {} (corrupted)", crc,
                                          entry.at("crc32").get<std::string>()));
  }
}

// Where each parameter's elements are in the files of a checkpoint of any layout, and the reads
// that fill another layout's file from them. Source files are checked (size, CRC-32) once, before
// their first read, so a reader touches only the files it needs.
class CheckpointSources {
 public:
  CheckpointSources(const fs::path& checkpoint, const schemas::ModelConfig& model,
                    const json& state)
      : checkpoint_(checkpoint),
        state_(state),
        names_(parameter_names(model)),
        pieces_(names_.size()) {
    const json parallel = state.contains("parallel") ? state.at("parallel") : json();
    const std::vector<std::int64_t> writers =
        parallel.is_null() ? std::vector<std::int64_t>{0} : checkpoint_writer_ranks(parallel);
    for (const std::int64_t rank : writers) {
      const RankCheckpointLayout layout = layout_of(model, parallel, rank);
      if (layout.writes_values) add(layout.values, layout.values_file, 0);
      if (layout.writes_moments) add(layout.moments, layout.moments_file, layout.moments_elements);
    }
  }

  // Checks every source file now (a whole-checkpoint rewrite refuses before writing anything).
  void check_all_files() {
    for (const auto& pieces : pieces_) {
      for (const Piece& piece : pieces) checked(piece.file);
    }
  }

  // Fills `buffer` (a file of the target layout: for moments, `target_half` elements of first
  // moments, then as many of second moments) at `segments` from the source files.
  void fill(const std::vector<FileSegment>& segments, bool moments, std::int64_t target_half,
            std::vector<float>& buffer) {
    std::vector<std::pair<std::int64_t, std::int64_t>> read;  // [begin, end) read, global
    for (const FileSegment& segment : segments) {
      read.clear();
      for (const Piece& piece : pieces_[segment.parameter]) {
        if (piece.moments != moments) continue;
        const std::int64_t begin = std::max(segment.global_offset, piece.global_offset);
        const std::int64_t end =
            std::min(segment.global_offset + segment.length, piece.global_offset + piece.length);
        if (begin >= end) continue;
        std::ifstream& in = checked(piece.file);
        for (std::int64_t half = 0; half < (moments ? 2 : 1); ++half) {
          const std::int64_t from =
              half * piece.half + piece.file_offset + (begin - piece.global_offset);
          const std::int64_t to =
              half * target_half + segment.file_offset + (begin - segment.global_offset);
          in.seekg(static_cast<std::streamoff>(from * sizeof(float)));
          in.read(reinterpret_cast<char*>(buffer.data() + to),
                  static_cast<std::streamsize>((end - begin) * sizeof(float)));
          STRATA_CHECK(in.good(), "{}: short read at element {}", piece.file, from);
        }
        read.emplace_back(begin, end);
      }
      check_covered(segment, read);
    }
  }

 private:
  struct Piece {
    std::int64_t global_offset = 0, length = 0, file_offset = 0;
    std::string file;
    bool moments = false;
    std::int64_t half = 0;  // moments: elements in one half of the file
  };

  static std::vector<std::string> parameter_names(const schemas::ModelConfig& model) {
    std::vector<std::string> names;
    for (const ParameterSpec& spec : transformer_parameters(model)) names.push_back(spec.name);
    return names;
  }

  void add(const std::vector<FileSegment>& segments, const std::string& file, std::int64_t half) {
    for (const FileSegment& segment : segments) {
      pieces_[segment.parameter].push_back(
          {segment.global_offset, segment.length, segment.file_offset, file, half > 0, half});
    }
  }

  // The open source file, checked against state.json on first use.
  std::ifstream& checked(const std::string& file) {
    auto found = open_.find(file);
    if (found != open_.end()) return found->second;
    check_file(checkpoint_, state_, file);
    std::ifstream& in = open_[file];
    in.open(checkpoint_ / file, std::ios::binary);
    return in;
  }

  // Every element of the segment was read (pieces may overlap: a tied embedding's two copies).
  void check_covered(const FileSegment& segment,
                     std::vector<std::pair<std::int64_t, std::int64_t>>& read) const {
    std::sort(read.begin(), read.end());
    std::int64_t reached = segment.global_offset;
    for (const auto& [begin, end] : read) {
      if (begin > reached) break;
      reached = std::max(reached, end);
    }
    if (reached < segment.global_offset + segment.length) {
      throw schemas::InputError(
          (checkpoint_ / "state.json").string(), "/files",
          fmt::format("no file holds elements {}..{} of {}", reached,
                      segment.global_offset + segment.length, names_[segment.parameter]));
    }
  }

  fs::path checkpoint_;
  const json& state_;
  std::vector<std::string> names_;
  std::vector<std::vector<Piece>> pieces_;
  std::map<std::string, std::ifstream> open_;
};

// Copies a flat host buffer into tensors, one after another.
void scatter_buffer(std::vector<float>& buffer, const std::vector<Tensor*>& tensors) {
  std::size_t offset = 0;
  for (Tensor* tensor : tensors) {
    STRATA_CHECK(tensor->scalar_type() == ScalarType::float32 &&
                     offset + static_cast<std::size_t>(tensor->numel()) <= buffer.size(),
                 "checkpoint state tensor does not fit its file");
    tensor->copy_from(
        Tensor::borrow(buffer.data() + offset, tensor->shape(), ScalarType::float32, Device::cpu));
    offset += static_cast<std::size_t>(tensor->numel());
  }
  STRATA_CHECK(offset == buffer.size(), "checkpoint file of {} elements, state tensors of {}",
               buffer.size(), offset);
}

const ParameterStore& whole_model_store(const schemas::ModelConfig& model,
                                        std::optional<ParameterStore>& storage) {
  storage.emplace(transformer_parameters(model), ScalarType::float32, Device::cpu, std::nullopt,
                  StoreOptions{0, 1, false, false});
  return *storage;
}

}  // namespace

schemas::ModelConfig read_checkpoint_model(const fs::path& checkpoint) {
  const fs::path state_path = checkpoint / "state.json";
  if (!fs::exists(state_path)) {
    throw schemas::InputError(checkpoint.string(), "", "not a checkpoint: state.json is missing");
  }
  const json state = schemas::read_json_file(state_path);
  if (!state.contains("model")) {
    throw schemas::InputError(state_path.string(), "/model", "missing: no model recorded");
  }
  return schemas::parse_model(state.at("model"),
                              schemas::JsonLocation{state_path.string(), "/model"});
}

TrainingState read_checkpoint_values(const fs::path& checkpoint, const schemas::ModelConfig& model,
                                     ParameterStore& parameters) {
  const std::string source = (checkpoint / "state.json").string();
  try {
    if (!recorded_checkpoint_layout(checkpoint).is_null()) {
      const TrainingState state =
          read_resharded_checkpoint(checkpoint, model, json(), 0, {&parameters.values()}, {});
      parameters.refresh_compute_values();
      return state;
    }
    const json state = verified_state(checkpoint, model, parameters, false);
    read_binary(checkpoint, state, "model.bin", {&parameters.values()});
    parameters.refresh_compute_values();
    return training_state_of(state);
  } catch (const json::exception& error) {
    throw schemas::InputError(source, "",
                              fmt::format("malformed checkpoint state: {}", error.what()));
  }
}

std::string checkpoint_layout_text(const json& parallel) {
  return parallel.is_null() ? std::string("one device") : mesh_text(parallel);
}

json recorded_checkpoint_layout(const fs::path& checkpoint) {
  const fs::path state_path = checkpoint / "state.json";
  if (!fs::exists(state_path)) {
    throw schemas::InputError(checkpoint.string(), "", "not a checkpoint: state.json is missing");
  }
  const json state = schemas::read_json_file(state_path);
  check_checkpoint_state(state, state_path.string());
  return state.contains("parallel") ? state.at("parallel") : json();
}

TrainingState read_resharded_checkpoint(const fs::path& checkpoint,
                                        const schemas::ModelConfig& model, const json& target,
                                        std::int64_t rank, const std::vector<Tensor*>& values,
                                        const std::vector<Tensor*>& moments) {
  const std::string source = (checkpoint / "state.json").string();
  try {
    std::optional<ParameterStore> whole;
    const json state = verified_state(checkpoint, model, whole_model_store(model, whole), true);
    CheckpointSources sources(checkpoint, model, state);
    const RankCheckpointLayout layout = layout_of(model, target, rank);
    std::vector<float> buffer(static_cast<std::size_t>(layout.values_elements), 0.0f);
    sources.fill(layout.values, false, 0, buffer);
    scatter_buffer(buffer, values);
    if (!moments.empty()) {  // none asked for: a reader of the model alone
      buffer.assign(static_cast<std::size_t>(2 * layout.moments_elements), 0.0f);
      sources.fill(layout.moments, true, layout.moments_elements, buffer);
      scatter_buffer(buffer, moments);
    }
    return training_state_of(state);
  } catch (const json::exception& error) {
    throw schemas::InputError(source, "",
                              fmt::format("malformed checkpoint state: {}", error.what()));
  }
}

fs::path reshard_checkpoint(const fs::path& source, const schemas::ModelConfig& model,
                            const json& target, const fs::path& directory) {
  std::optional<ParameterStore> whole;
  json state = verified_state(source, model, whole_model_store(model, whole), true);
  CheckpointSources sources(source, model, state);
  sources.check_all_files();
  const std::int64_t step = state.at("step").get<std::int64_t>();
  const fs::path temporary = create_temporary(directory, step, ::getpid());
  json files = json::object();
  const std::int64_t target_world = target.is_null() ? 1 : world_of(target);
  for (std::int64_t rank = 0; rank < target_world; ++rank) {
    const RankCheckpointLayout layout = layout_of(model, target, rank);
    if (layout.writes_values) {
      std::vector<float> buffer(static_cast<std::size_t>(layout.values_elements), 0.0f);
      sources.fill(layout.values, false, 0, buffer);
      const Tensor tensor =
          Tensor::borrow(buffer.data(), {layout.values_elements}, ScalarType::float32);
      files[layout.values_file] = write_binary(temporary / layout.values_file, {&tensor});
    }
    if (layout.writes_moments) {
      std::vector<float> buffer(static_cast<std::size_t>(2 * layout.moments_elements), 0.0f);
      sources.fill(layout.moments, true, layout.moments_elements, buffer);
      const Tensor tensor =
          Tensor::borrow(buffer.data(), {2 * layout.moments_elements}, ScalarType::float32);
      files[layout.moments_file] = write_binary(temporary / layout.moments_file, {&tensor});
    }
  }
  state["files"] = std::move(files);
  if (target.is_null()) {
    state.erase("parallel");
  } else {
    state["parallel"] = target;
  }
  state[kCheckpointStateChecksumKey] = checkpoint_state_checksum(state);
  return finish_checkpoint(directory, temporary, step, state);
}

}  // namespace strata::executor
