// The names of a parallel checkpoint's files, for random valid plans of a mixture of experts
// (every mesh order, cp, hybrid sharding, ep and etp, every ZeRO stage): each name is written by
// exactly one rank, every rank finds each of its files written, and the rank that wrote a file
// holds exactly the elements every rank reading it back expects there. The layout component's
// boxes of each rank's state (layout/state_boxes.h, which a switch moves and the planner prices)
// hold the same elements at the same offsets as the files' runs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "random_plans.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/sharded_checkpoint.h"
#include "strata/layout/state_boxes.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

using Segments = std::vector<std::tuple<std::size_t, std::int64_t, std::int64_t, std::int64_t>>;

Segments segments_of(const std::vector<FileSegment>& segments) {
  Segments listed;
  for (const FileSegment& segment : segments) {
    listed.emplace_back(segment.parameter, segment.global_offset, segment.file_offset,
                        segment.length);
  }
  return listed;
}

// In file order, adjacent runs of one parameter merged: the same elements listed the same way.
Segments normalised(Segments runs) {
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return std::get<2>(a) < std::get<2>(b); });
  Segments merged;
  for (const auto& [parameter, global, file, length] : runs) {
    if (!merged.empty()) {
      auto& [last_parameter, last_global, last_file, last_length] = merged.back();
      if (last_parameter == parameter && last_global + last_length == global &&
          last_file + last_length == file) {
        last_length += length;
        continue;
      }
    }
    merged.emplace_back(parameter, global, file, length);
  }
  return merged;
}

// A rank's boxes as runs of elements: a run per row of each box.
Segments runs_of(const std::vector<layout::StateBox>& boxes,
                 const std::vector<layout::ParameterView>& views) {
  Segments runs;
  for (const layout::StateBox& box : boxes) {
    for (std::int64_t row = 0; row < box.rows; ++row) {
      runs.emplace_back(box.parameter, (box.row + row) * views[box.parameter].cols + box.col,
                        box.offset + row * box.pitch, box.cols);
    }
  }
  return normalised(std::move(runs));
}

// Checks one kind of file ("values" or "moments") of a plan's checkpoint; `what` names the case.
void expect_one_writer_holding_what_readers_read(const std::vector<RankCheckpointLayout>& ranks,
                                                 bool moments, const std::string& what) {
  const auto name_of = [&](const RankCheckpointLayout& layout) {
    return moments ? layout.moments_file : layout.values_file;
  };
  std::map<std::string, std::size_t> writer;
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    if (!(moments ? ranks[rank].writes_moments : ranks[rank].writes_values)) continue;
    const auto [at, fresh] = writer.emplace(name_of(ranks[rank]), rank);
    EXPECT_TRUE(fresh) << what << ": ranks " << at->second << " and " << rank << " both write "
                       << name_of(ranks[rank]);
  }
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    const auto found = writer.find(name_of(ranks[rank]));
    ASSERT_NE(found, writer.end())
        << what << ": nobody writes rank " << rank << "'s " << name_of(ranks[rank]);
    const RankCheckpointLayout& written = ranks[found->second];
    const RankCheckpointLayout& read = ranks[rank];
    EXPECT_EQ(moments ? written.moments_elements : written.values_elements,
              moments ? read.moments_elements : read.values_elements)
        << what << ": " << name_of(read);
    EXPECT_EQ(segments_of(moments ? written.moments : written.values),
              segments_of(moments ? read.moments : read.values))
        << what << ": rank " << found->second << " writes " << name_of(read) << ", which rank "
        << rank << " reads other elements from";
  }
}

TEST(CheckpointFileNames, EachFileHasOneWriterHoldingWhatEveryReaderReadsAndTheStateBoxesSay) {
  const schemas::ModelConfig model = schemas::model_preset("moe-tiny");
  const layout::ModelStateBoxes state_boxes(model);
  strata::testing::RandomPlans plans(20261129);
  int checked = 0, with_experts = 0, cp_with_shards = 0;
  for (int attempt = 0; attempt < 600 && checked < 120; ++attempt) {
    const std::optional<schemas::Plan> drawn = plans.draw(model);
    if (!drawn) continue;  // not a valid plan: the rules refuse it before any checkpoint
    const schemas::Plan& plan = *drawn;
    const std::int64_t ranks = plan.mesh.world_size();
    const std::optional<layout::StateLayout> state_layout = layout::state_layout_of(plan);
    if (!state_layout) continue;
    const std::string what = layout::to_json(state_layout).dump();
    std::vector<RankCheckpointLayout> files;
    for (std::int64_t rank = 0; rank < ranks; ++rank) {
      files.push_back(rank_checkpoint_layout(model, *state_layout, rank));
      const layout::RankStateBoxes boxes = state_boxes.of_rank(layout::state_layout_of(plan), rank);
      const RankCheckpointLayout& file = files.back();
      EXPECT_EQ(boxes.values_elements, file.values_elements) << what << " rank " << rank;
      EXPECT_EQ(boxes.moments_elements, file.moments_elements) << what << " rank " << rank;
      EXPECT_EQ(runs_of(boxes.values, state_boxes.views()), normalised(segments_of(file.values)))
          << what << " rank " << rank << ": values";
      EXPECT_EQ(runs_of(boxes.moments, state_boxes.views()), normalised(segments_of(file.moments)))
          << what << " rank " << rank << ": moments";
    }
    expect_one_writer_holding_what_readers_read(files, false, what);
    expect_one_writer_holding_what_readers_read(files, true, what);
    // The writers are the ranks the resharding reads from.
    std::vector<std::int64_t> writers;
    for (std::int64_t rank = 0; rank < ranks; ++rank) {
      const RankCheckpointLayout& file = files[static_cast<std::size_t>(rank)];
      if (file.writes_values || file.writes_moments) writers.push_back(rank);
    }
    EXPECT_EQ(writers, checkpoint_writer_ranks(*state_layout)) << what;
    ++checked;
    with_experts += plan.mesh.ep * plan.mesh.etp > 1;
    cp_with_shards += plan.mesh.ep > 1 && plan.mesh.cp > 1 && plan.zero_stage >= 1;
  }
  EXPECT_GE(checked, 60);
  EXPECT_GE(with_experts, 30);
  EXPECT_GE(cp_with_shards, 5) << "the case of the defect: experts, cp and sharded moments";
}

// The defect's plan (issue: adversarial inputs, third round): experts, cp, hybrid sharding and a
// mesh order with dp before cp — ranks 0 and 8's dense shards differ under one expert shard.
TEST(CheckpointFileNames, ExpertShardsUnderCpAndHybridShardingNameBothShards) {
  const schemas::ModelConfig model = schemas::model_preset("moe-tiny");
  schemas::PlanKnobs knobs;
  knobs.mesh = schemas::Mesh{.tp = 1, .cp = 2, .dp = 2, .pp = 1, .dp_shard = 1, .ep = 2};
  knobs.mesh.order = {schemas::MeshAxis::tp, schemas::MeshAxis::dp, schemas::MeshAxis::cp,
                      schemas::MeshAxis::pp};
  knobs.zero_stage = 1;
  knobs.precision = schemas::Dtype::fp32;
  knobs.seq_length = 64;
  knobs.global_batch_size = 2;
  const schemas::Plan plan =
      schemas::build_plan(model, schemas::cluster_preset("cpu-local:4"), knobs, "test");
  const std::optional<layout::StateLayout> state_layout = layout::state_layout_of(plan);
  std::vector<std::string> moments;
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    const ShardedCheckpointPart part = checkpoint_part_of(state_layout, rank);
    if (part.writes_moments) moments.push_back(part.moments_file);
  }
  EXPECT_EQ(moments,
            (std::vector<std::string>{
                "optimizer.tp0.pp0.ep0.dp0.edp0.bin", "optimizer.tp0.pp0.ep1.dp0.edp0.bin",
                "optimizer.tp0.pp0.ep0.dp1.edp0.bin", "optimizer.tp0.pp0.ep1.dp1.edp0.bin"}));
}

}  // namespace
}  // namespace strata::executor
