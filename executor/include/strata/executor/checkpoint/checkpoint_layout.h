// CheckpointLayout: where every element of one rank's checkpoint files lives in the whole model,
// computed from the checkpoint's state layout (layout/state_layout.h: mesh, pipeline stages, ZeRO
// stage, bucket size) and the model alone — without building that rank's model or reading its
// files. Resharding maps each element of a target layout's files to the files of the source layout
// through it, one file at a time (strata reshard, and a resume on another plan).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/layout/state_layout.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// `length` elements of parameter `parameter` (an index into transformer_parameters(model)) from
// its flat element `global_offset` on sit at element `file_offset` of a file.
struct FileSegment {
  std::size_t parameter = 0;
  std::int64_t global_offset = 0;
  std::int64_t file_offset = 0;
  std::int64_t length = 0;
};

struct RankCheckpointLayout {
  std::string values_file, moments_file;
  bool writes_values = false, writes_moments = false;
  std::int64_t values_elements = 0;   // the values file's length, in elements
  std::int64_t moments_elements = 0;  // one half of the moments file (first, then second moments)
  std::vector<FileSegment> values;
  std::vector<FileSegment> moments;  // of the first half; the second half repeats it
};

// The ranks that write files in a parallel checkpoint: the context-parallel rank 0 of each tp and
// pp rank, and of each dp rank where ZeRO shards (else dp rank 0 alone): as many as the
// checkpoint has files per kind, never the whole mesh (the rest hold copies).
std::vector<std::int64_t> checkpoint_writer_ranks(const layout::StateLayout& state_layout);

// The layout of `rank`'s files in a parallel checkpoint of `state_layout`.
RankCheckpointLayout rank_checkpoint_layout(const schemas::ModelConfig& model,
                                            const layout::StateLayout& state_layout,
                                            std::int64_t rank);
// The same where the layout may be none (one device: the whole model in store order, in
// model.bin and optimizer.bin).
RankCheckpointLayout rank_state_layout(const schemas::ModelConfig& model,
                                       const std::optional<layout::StateLayout>& state_layout,
                                       std::int64_t rank);

}  // namespace strata::executor
