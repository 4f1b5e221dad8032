// The in-memory layout transfer: 8 ranks (threads) cycle a model's state through Hetu's example
// strategies and more — tp2·dp2·pp2, dp8 at ZeRO-1, tp2·dp4 at ZeRO-3, tp8 (kv heads replicated
// over four ranks each), cp2·dp4 at ZeRO-1, tp2·dp2·pp2 at ZeRO-1 and back — and after every
// switch each rank's values and both moments must be, element for element, the whole model's
// elements its new layout says it holds (the checkpoint layout's map, the one the files use).
// A switch between identical layouts moves nothing; one that only changes the ZeRO stage moves
// only what a rank did not hold. Random switches between layouts of a mixture of experts (every
// mesh order, cp, hybrid shards, ep and etp, ZeRO 0–3, pipelines and bucket sizes) are checked
// element for element the same way.
#include "strata/executor/checkpoint/layout_transfer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "random_plans.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/model/transformer.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "threaded_communicator.h"

namespace strata::executor {
namespace {

constexpr int kRanks = 8;

// llama-tiny with 8 heads of 32 over 2 kv heads: tp 8 replicates each kv head over 4 ranks.
schemas::ModelConfig eight_head_model() {
  schemas::ModelConfig model = schemas::model_preset("llama-tiny");
  model.num_attention_heads = 8;
  model.head_dim = 32;
  return model;
}

std::optional<layout::StateLayout> layout(const schemas::ModelConfig& model, schemas::Mesh mesh,
                                          std::int64_t zero_stage) {
  schemas::PlanKnobs knobs;
  knobs.seq_length = 64;
  knobs.micro_batch_size = 1;
  knobs.global_batch_size = 8;
  knobs.mesh = mesh;
  knobs.sequence_parallel = mesh.tp > 1;
  knobs.zero_stage = zero_stage;
  knobs.precision = schemas::Dtype::fp32;
  const schemas::Plan plan =
      schemas::build_plan(model, schemas::cluster_preset("cpu-local:8"), knobs, "test");
  return layout::state_layout_of(plan);
}

// Distinct numbers for every element of the whole model's values and moments.
double whole_value(std::size_t parameter, std::int64_t index, int kind) {
  return static_cast<double>(parameter) * 1e6 + static_cast<double>(index) + 0.25 * kind;
}

struct State {
  Tensor values, first, second;
  RankState view() { return {&values, &first, &second}; }
};

// A rank's state under `parallel`, filled from the whole model through the layout's map.
State state_of(const schemas::ModelConfig& model,
               const std::optional<layout::StateLayout>& parallel, std::int64_t rank) {
  const RankCheckpointLayout map = rank_state_layout(model, parallel, rank);
  State state{Tensor::zeros({map.values_elements}, ScalarType::float64),
              Tensor::zeros({map.moments_elements}, ScalarType::float64),
              Tensor::zeros({map.moments_elements}, ScalarType::float64)};
  for (const FileSegment& segment : map.values) {
    for (std::int64_t i = 0; i < segment.length; ++i) {
      state.values.data<double>()[segment.file_offset + i] =
          whole_value(segment.parameter, segment.global_offset + i, 0);
    }
  }
  for (const FileSegment& segment : map.moments) {
    for (std::int64_t i = 0; i < segment.length; ++i) {
      state.first.data<double>()[segment.file_offset + i] =
          whole_value(segment.parameter, segment.global_offset + i, 1);
      state.second.data<double>()[segment.file_offset + i] =
          whole_value(segment.parameter, segment.global_offset + i, 2);
    }
  }
  return state;
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    ASSERT_EQ(got.data<double>()[i], want.data<double>()[i]) << what << " element " << i;
  }
}

// Moves `from`'s state to `to`'s on `ranks` threads and checks every rank's new state.
void expect_switch_moves_every_element(const schemas::ModelConfig& model,
                                       const std::optional<layout::StateLayout>& from,
                                       const std::optional<layout::StateLayout>& to, int ranks,
                                       const std::string& what) {
  const LayoutTransfer transfer(model, from, to, ranks);
  testing::run_on_threads(ranks, [&](Communicator& world) {
    const int rank = world.rank();
    State before = state_of(model, from, rank);
    State after{Tensor::zeros({transfer.target_values_elements(rank)}, ScalarType::float64),
                Tensor::zeros({transfer.target_moments_elements(rank)}, ScalarType::float64),
                Tensor::zeros({transfer.target_moments_elements(rank)}, ScalarType::float64)};
    transfer.run(world, before.view(), after.view());
    const State expected = state_of(model, to, rank);
    const std::string where = fmt::format("{}, rank {}", what, rank);
    expect_equal(after.values, expected.values, where + ", values");
    expect_equal(after.first, expected.first, where + ", first moments");
    expect_equal(after.second, expected.second, where + ", second moments");
  });
}

TEST(LayoutTransfer, StateCyclesThroughEveryStrategyElementForElement) {
  const schemas::ModelConfig model = eight_head_model();
  using schemas::Mesh;
  const std::vector<std::pair<std::string, std::optional<layout::StateLayout>>> cycle{
      {"tp2·dp2·pp2", layout(model, Mesh{.tp = 2, .cp = 1, .dp = 2, .pp = 2}, 0)},
      {"dp8 ZeRO-1", layout(model, Mesh{.tp = 1, .cp = 1, .dp = 8, .pp = 1}, 1)},
      {"tp2·dp4 ZeRO-3", layout(model, Mesh{.tp = 2, .cp = 1, .dp = 4, .pp = 1}, 3)},
      {"tp8", layout(model, Mesh{.tp = 8, .cp = 1, .dp = 1, .pp = 1}, 0)},
      {"cp2·dp4 ZeRO-1", layout(model, Mesh{.tp = 1, .cp = 2, .dp = 4, .pp = 1}, 1)},
      {"tp2·dp2·pp2 ZeRO-1", layout(model, Mesh{.tp = 2, .cp = 1, .dp = 2, .pp = 2}, 1)},
      {"tp2·dp2·pp2", layout(model, Mesh{.tp = 2, .cp = 1, .dp = 2, .pp = 2}, 0)}};
  for (std::size_t s = 0; s + 1 < cycle.size(); ++s) {
    const auto& [from_name, from] = cycle[s];
    const auto& [to_name, to] = cycle[s + 1];
    const LayoutTransfer transfer(model, from, to, kRanks);
    std::int64_t sent = 0, received = 0;
    for (int rank = 0; rank < kRanks; ++rank) {
      sent += transfer.sent_elements(rank);
      received += transfer.received_elements(rank);
    }
    EXPECT_EQ(sent, received) << from_name << " → " << to_name;
    EXPECT_GT(sent, 0) << from_name << " → " << to_name;
    expect_switch_moves_every_element(model, from, to, kRanks, from_name + " → " + to_name);
  }
}

TEST(LayoutTransfer, RandomSwitchesOfAMixtureOfExpertsMoveEveryElement) {
  const schemas::ModelConfig model = schemas::model_preset("moe-tiny");
  strata::testing::RandomPlans plans(20261130);
  std::map<std::int64_t, std::optional<layout::StateLayout>>
      last_of_world;  // the last layout drawn of each size
  int switches = 0, with_experts = 0;
  for (int attempt = 0; attempt < 400 && switches < 24; ++attempt) {
    const std::optional<schemas::Plan> plan = plans.draw(model);
    if (!plan || plan->mesh.world_size() == 1 || plan->mesh.world_size() > 8) continue;
    const std::int64_t ranks = plan->mesh.world_size();
    const std::optional<layout::StateLayout> to = layout::state_layout_of(*plan);
    const auto previous = last_of_world.find(ranks);
    if (previous != last_of_world.end() && previous->second != to) {
      expect_switch_moves_every_element(
          model, previous->second, to, static_cast<int>(ranks),
          layout::to_json(previous->second).dump() + " → " + layout::to_json(to).dump());
      ++switches;
      with_experts += plan->mesh.ep * plan->mesh.etp > 1;
    }
    last_of_world[ranks] = to;
  }
  EXPECT_GE(switches, 16);
  EXPECT_GE(with_experts, 6);
}

TEST(LayoutTransfer, IdenticalPlacementsMoveNothingAndReplicasShareTheSending) {
  const schemas::ModelConfig model = eight_head_model();
  using schemas::Mesh;
  const std::optional<layout::StateLayout> dp8 =
      layout(model, Mesh{.tp = 1, .cp = 1, .dp = 8, .pp = 1}, 0);
  const LayoutTransfer same(model, dp8, dp8, kRanks);
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(same.sent_elements(rank), 0) << rank;
    EXPECT_EQ(same.received_elements(rank), 0) << rank;
  }
  // ZeRO-0 → ZeRO-1 over dp 8: every rank already holds its shard of the moments (whole state
  // before), so nothing moves either.
  const std::optional<layout::StateLayout> dp8_zero1 =
      layout(model, Mesh{.tp = 1, .cp = 1, .dp = 8, .pp = 1}, 1);
  const LayoutTransfer sharding(model, dp8, dp8_zero1, kRanks);
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(sharding.sent_elements(rank), 0) << rank;
  // ZeRO-1 → ZeRO-0: each rank receives the seven shards it lacks, two moments each, and the
  // eight holders of a shard's only copy send it to the seven others alike.
  const LayoutTransfer gathering(model, dp8_zero1, dp8, kRanks);
  const std::int64_t moments = gathering.target_moments_elements(0);
  for (int rank = 0; rank < kRanks; ++rank) {
    std::int64_t shard = 0;  // the model's elements in the rank's shards (padding aside)
    for (const FileSegment& segment : rank_state_layout(model, dp8_zero1, rank).moments) {
      shard += segment.length;
    }
    EXPECT_EQ(gathering.received_elements(rank), 2 * (moments - shard)) << rank;
    EXPECT_EQ(gathering.sent_elements(rank), 2 * shard * (kRanks - 1)) << rank;
  }
  // tp 2 · dp 4 → dp 8 (ZeRO-0): half of each rank's new values are on its own tp slice; the
  // other half comes from the four ranks of the other slice, shared between them.
  const std::optional<layout::StateLayout> tp2 =
      layout(model, Mesh{.tp = 2, .cp = 1, .dp = 4, .pp = 1}, 0);
  const LayoutTransfer merge(model, tp2, dp8, kRanks);
  std::int64_t most = 0, least = std::numeric_limits<std::int64_t>::max();
  for (int rank = 0; rank < kRanks; ++rank) {
    most = std::max(most, merge.sent_elements(rank));
    least = std::min(least, merge.sent_elements(rank));
  }
  EXPECT_GT(least, 0);
  EXPECT_LE(most, 2 * least) << "replicas should share the sending";
}

}  // namespace
}  // namespace strata::executor
