#include "strata/executor/checkpoint/sharded_checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "checkpoint_files.h"
#include "state_document.h"
#include "strata/executor/check.h"
#include "strata/executor/checkpoint/checkpoint_directory.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/checkpoint_resharding.h"
#include "strata/executor/distributed/typed_collectives.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::executor {

namespace fs = std::filesystem;
using nlohmann::json;

ShardedCheckpointPart sharded_checkpoint_files(const schemas::Mesh& mesh, std::int64_t zero_stage,
                                               std::int64_t rank) {
  const schemas::MeshCoordinates at = schemas::mesh_coordinates(mesh, rank);
  const auto coordinate = [&](schemas::MeshAxis axis) {
    return at[static_cast<std::size_t>(axis)];
  };
  // ZeRO shards over the shard group (the dp × cp group without hybrid sharding): a rank's shard
  // is its place in that group, its dp rank without cp. The first replica of each shard writes
  // it; below a stage's sharding the first group's first rank writes the replicated state.
  const std::int64_t shard = schemas::zero_shard_rank(mesh, rank);
  const bool first_replica = schemas::zero_replica_rank(mesh, rank) == 0;
  const std::int64_t tp = coordinate(schemas::MeshAxis::tp);
  const std::int64_t pp = coordinate(schemas::MeshAxis::pp);
  ShardedCheckpointPart part;
  part.rank = rank;
  if (mesh.ep * mesh.etp > 1) {
    // Expert (tensor) parallelism: a rank's files hold its dense state (its tp slice; its ZeRO
    // shard when sharded) and its routed experts (its ep range and etp part of their width; its
    // expert shard when sharded). A file's name is everything its contents follow from — tp, pp,
    // ep (etp too when it splits them) and, when sharded, the dense shard and the expert shard —
    // so ranks of one name hold the same bytes and the lowest of them writes it. The two shards
    // vary independently: with cp or hybrid sharding, and mesh orders that put dp before cp, ranks
    // holding one expert shard hold different dense shards.
    using Key = std::array<std::int64_t, 6>;
    const auto key_of = [&](std::int64_t other, bool sharded) {
      const schemas::MeshCoordinates place = schemas::mesh_coordinates(mesh, other);
      const schemas::ExpertCoordinates expert = schemas::expert_coordinates(mesh, other);
      return Key{place[static_cast<std::size_t>(schemas::MeshAxis::tp)],
                 place[static_cast<std::size_t>(schemas::MeshAxis::pp)],
                 expert[static_cast<std::size_t>(schemas::ExpertAxis::ep)],
                 expert[static_cast<std::size_t>(schemas::ExpertAxis::etp)],
                 sharded ? schemas::zero_shard_rank(mesh, other) : 0,
                 sharded ? schemas::expert_zero_shard_rank(mesh, other) : 0};
    };
    const auto writes = [&](bool sharded) {
      const Key own = key_of(rank, sharded);
      for (std::int64_t other = 0; other < rank; ++other) {
        if (key_of(other, sharded) == own) return false;
      }
      return true;
    };
    const Key own = key_of(rank, true);
    const std::int64_t ep = own[2], etp = own[3], dense_shard = own[4], expert_shard = own[5];
    const std::string experts =
        mesh.etp > 1 ? fmt::format("ep{}.etp{}", ep, etp) : fmt::format("ep{}", ep);
    const auto name = [&](const char* kind, bool sharded) {
      return sharded ? fmt::format("{}.tp{}.pp{}.{}.dp{}.edp{}.bin", kind, tp, pp, experts,
                                   dense_shard, expert_shard)
                     : fmt::format("{}.tp{}.pp{}.{}.bin", kind, tp, pp, experts);
    };
    part.values_file = name("model", zero_stage >= 3);
    part.moments_file = name("optimizer", zero_stage >= 1);
    part.writes_values = writes(zero_stage >= 3);
    part.writes_moments = writes(zero_stage >= 1);
    return part;
  }
  const bool sharded_values = zero_stage >= 3;
  const bool sharded_moments = zero_stage >= 1;
  part.values_file = fmt::format("model.tp{}.pp{}.dp{}.bin", tp, pp, sharded_values ? shard : 0);
  part.moments_file =
      fmt::format("optimizer.tp{}.pp{}.dp{}.bin", tp, pp, sharded_moments ? shard : 0);
  part.writes_values = first_replica && (shard == 0 || sharded_values);
  part.writes_moments = first_replica && (shard == 0 || sharded_moments);
  return part;
}

ShardedCheckpointPart checkpoint_part_of(const std::optional<layout::StateLayout>& state_layout,
                                         std::int64_t rank) {
  if (!state_layout) {
    ShardedCheckpointPart part;
    part.values_file = "model.bin";
    part.moments_file = "optimizer.bin";
    part.writes_values = part.writes_moments = true;
    return part;
  }
  ShardedCheckpointPart part =
      sharded_checkpoint_files(state_layout->mesh, state_layout->zero_stage, rank);
  part.layout = state_layout;
  return part;
}

namespace {

// What a rank reports of one file it may have written: whether it did, and its size and CRC-32.
struct WrittenFile {
  bool written = false;
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;
};
struct WrittenFiles {
  WrittenFile values, moments;
};

WrittenFile write_part_file(const fs::path& path, const std::vector<Tensor>& tensors) {
  std::vector<Tensor> host;
  for (const Tensor& tensor : tensors) host.push_back(on_host(tensor));
  std::vector<const Tensor*> pointers;
  for (const Tensor& tensor : host) pointers.push_back(&tensor);
  const json entry = write_tensor_file(path, pointers);
  return {
      true, entry.at("bytes").get<std::uint64_t>(),
      static_cast<std::uint32_t>(std::stoul(entry.at("crc32").get<std::string>(), nullptr, 16))};
}

// state.json's "files": every rank's written files under the names its part gives them.
json files_written(const std::optional<layout::StateLayout>& state_layout,
                   const std::vector<WrittenFiles>& everyone) {
  json files = json::object();
  for (std::size_t rank = 0; rank < everyone.size(); ++rank) {
    const ShardedCheckpointPart names =
        checkpoint_part_of(state_layout, static_cast<std::int64_t>(rank));
    const auto add = [&](const std::string& name, const WrittenFile& file) {
      if (file.written) {
        files[name] = json{{"bytes", file.bytes}, {"crc32", fmt::format("{:08x}", file.crc32)}};
      }
    };
    add(names.values_file, everyone[rank].values);
    add(names.moments_file, everyone[rank].moments);
  }
  return files;
}

}  // namespace

fs::path write_sharded_checkpoint(const fs::path& directory, const schemas::ModelConfig& model,
                                  const ParameterStore& parameters,
                                  const ShardedCheckpointPart& part, const TrainingState& state,
                                  Communicator& world) {
  // Rank 0 makes the temporary directory and tells everyone its name (its PID).
  long writer_pid = 0;
  if (world.rank() == 0) {
    create_temporary_checkpoint(directory, state.step, ::getpid());
    writer_pid = static_cast<long>(::getpid());
  }
  writer_pid = broadcast_record(world, writer_pid, 0);
  const fs::path temporary = temporary_checkpoint_path(directory, state.step, writer_pid);
  // Each rank writes its pieces and reports, for each of the two, whether it wrote it and what.
  WrittenFiles mine;
  if (part.writes_values) mine.values = write_part_file(temporary / part.values_file, part.values);
  if (part.writes_moments) {
    mine.moments = write_part_file(temporary / part.moments_file, part.moments);
  }
  const std::vector<WrittenFiles> everyone = all_gather_records(world, mine);
  int renamed = 0;
  std::string failure;
  if (world.rank() == 0) {
    try {
      const json document =
          state_document(model, parameters, state, files_written(part.layout, everyone),
                         layout::to_json(part.layout));
      commit_checkpoint(directory, temporary, state.step, document.dump(2) + "\n");
      renamed = 1;
    } catch (const schemas::InputError& error) {
      failure = error.what();
    }
  }
  renamed = broadcast_record(world, renamed, 0);
  const fs::path final_path = directory / checkpoint_directory_name(state.step);
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
  return reading_checkpoint_state(checkpoint, [&] {
    std::vector<Tensor*> values, moments;
    for (Tensor& tensor : part.values) values.push_back(&tensor);
    for (Tensor& tensor : part.moments) moments.push_back(&tensor);
    if (recorded_checkpoint_layout(checkpoint) != part.layout) {
      return read_resharded_checkpoint(checkpoint, model, part.layout, part.rank, values, moments);
    }
    const json state = verified_state(checkpoint, model, parameters, part.layout.has_value());
    read_tensor_file(checkpoint, state, part.values_file, values);
    read_tensor_file(checkpoint, state, part.moments_file, moments);
    return training_state_of(state);
  });
}

}  // namespace strata::executor
