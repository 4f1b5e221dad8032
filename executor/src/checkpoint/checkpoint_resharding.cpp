#include "strata/executor/checkpoint/checkpoint_resharding.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "checkpoint_files.h"
#include "state_document.h"
#include "strata/executor/check.h"
#include "strata/executor/checkpoint/checkpoint_directory.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/checkpoint_state_check.h"
#include "strata/executor/model/transformer.h"
#include "strata/schemas/input_error.h"

namespace strata::executor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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
    // The source's layout, read once from its state.json (checked by verified_state).
    const std::optional<layout::StateLayout> source =
        layout::state_layout_from_json(state.contains("parallel") ? state.at("parallel") : json());
    const std::vector<std::int64_t> writers =
        source ? checkpoint_writer_ranks(*source) : std::vector<std::int64_t>{0};
    for (const std::int64_t rank : writers) {
      const RankCheckpointLayout files = rank_state_layout(model, source, rank);
      if (files.writes_values) add(files.values, files.values_file, 0);
      if (files.writes_moments) add(files.moments, files.moments_file, files.moments_elements);
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
    read_checked_file(checkpoint_, state_, file);
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

TrainingState read_resharded_checkpoint(const fs::path& checkpoint,
                                        const schemas::ModelConfig& model,
                                        const std::optional<layout::StateLayout>& target,
                                        std::int64_t rank, const std::vector<Tensor*>& values,
                                        const std::vector<Tensor*>& moments) {
  return reading_checkpoint_state(checkpoint, [&] {
    std::optional<ParameterStore> whole;
    const json state = verified_state(checkpoint, model, whole_model_store(model, whole), true);
    CheckpointSources sources(checkpoint, model, state);
    const RankCheckpointLayout files = rank_state_layout(model, target, rank);
    std::vector<float> buffer(static_cast<std::size_t>(files.values_elements), 0.0f);
    sources.fill(files.values, false, 0, buffer);
    scatter_buffer(buffer, values);
    if (!moments.empty()) {  // none asked for: a reader of the model alone
      buffer.assign(static_cast<std::size_t>(2 * files.moments_elements), 0.0f);
      sources.fill(files.moments, true, files.moments_elements, buffer);
      scatter_buffer(buffer, moments);
    }
    return training_state_of(state);
  });
}

fs::path reshard_checkpoint(const fs::path& source, const schemas::ModelConfig& model,
                            const std::optional<layout::StateLayout>& target,
                            const fs::path& directory) {
  return reading_checkpoint_state(source, [&] {
    std::optional<ParameterStore> whole;
    json state = verified_state(source, model, whole_model_store(model, whole), true);
    CheckpointSources sources(source, model, state);
    sources.check_all_files();
    const std::int64_t step = state.at("step").get<std::int64_t>();
    const fs::path temporary = create_temporary_checkpoint(directory, step, ::getpid());
    json files = json::object();
    // One target file: `elements` values, or twice `elements` moments (first, then second).
    const auto write = [&](const std::string& name, const std::vector<FileSegment>& segments,
                           bool moments, std::int64_t elements) {
      const std::int64_t length = moments ? 2 * elements : elements;
      std::vector<float> buffer(static_cast<std::size_t>(length), 0.0f);
      sources.fill(segments, moments, moments ? elements : 0, buffer);
      const Tensor tensor = Tensor::borrow(buffer.data(), {length}, ScalarType::float32);
      files[name] = write_tensor_file(temporary / name, {&tensor});
    };
    const std::int64_t target_world = target ? target->mesh.world_size() : 1;
    for (std::int64_t rank = 0; rank < target_world; ++rank) {
      const RankCheckpointLayout target_files = rank_state_layout(model, target, rank);
      if (target_files.writes_values) {
        write(target_files.values_file, target_files.values, false, target_files.values_elements);
      }
      if (target_files.writes_moments) {
        write(target_files.moments_file, target_files.moments, true, target_files.moments_elements);
      }
    }
    state["files"] = std::move(files);
    if (target) {
      state["parallel"] = layout::to_json(target);
    } else {
      state.erase("parallel");
    }
    state[kCheckpointStateChecksumKey] = checkpoint_state_checksum(state);
    return commit_checkpoint(directory, temporary, step, state.dump(2) + "\n");
  });
}

}  // namespace strata::executor
