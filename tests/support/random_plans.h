// Random valid plans of a model on the CPU cluster of their world size, for the layout property
// tests (buckets, checkpoint files, state boxes, switches): tp, cp, dp with hybrid shards, pp with
// vpp, ep and etp where the model has routed experts, a shuffled mesh order, ZeRO 0–3 and bucket
// sizes from a bucket per unit to the default. Draws that the plan rules refuse are skipped.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <random>
#include <vector>

#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::testing {

class RandomPlans {
 public:
  explicit RandomPlans(std::uint32_t seed) : random_(seed) {}

  // One draw: a valid plan of `model`, or nullopt where the rules refuse the drawn layout.
  std::optional<schemas::Plan> draw(const schemas::ModelConfig& model) {
    schemas::PlanKnobs knobs;
    knobs.mesh.tp = pick({1, 2});
    knobs.mesh.cp = pick({1, 1, 2});
    knobs.mesh.dp = pick({1, 2, 4});
    knobs.mesh.pp = pick({1, 1, 2});
    knobs.mesh.vpp = knobs.mesh.pp > 1 ? pick({1, 2}) : 1;
    knobs.mesh.dp_shard = pick({0, 0, 1, 2});
    if (model.moe) {
      knobs.mesh.ep = pick({1, 2, 4, 8});
      knobs.mesh.etp = pick({1, 1, 2});
    }
    std::shuffle(order_.begin(), order_.end(), random_);
    knobs.mesh.order = order_;
    knobs.schedule = knobs.mesh.vpp > 1 ? schemas::ScheduleType::interleaved_one_f_one_b
                                        : schemas::ScheduleType::one_f_one_b;
    knobs.zero_stage = pick({0, 1, 2, 3});
    knobs.sequence_parallel = knobs.mesh.tp > 1;
    knobs.precision = schemas::Dtype::fp32;  // the CPU cluster's
    knobs.seq_length = 64;
    knobs.micro_batch_size = 1;
    knobs.global_batch_size = 4 * knobs.mesh.dp;
    // A few elements (a bucket per unit, or per piece), a layer's worth, or the default.
    const std::int64_t bucket = pick({0, 1, 5'000, 30'000, 200'000});
    if (bucket > 0) knobs.gradient_bucket_elements = bucket;
    try {
      return schemas::build_plan(
          model, schemas::cluster_preset(fmt::format("cpu-local:{}", knobs.mesh.world_size())),
          knobs, "test");
    } catch (const schemas::InputError&) {
      return std::nullopt;
    }
  }

 private:
  std::int64_t pick(std::initializer_list<std::int64_t> values) {
    const std::vector<std::int64_t> choices(values);
    return choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(random_)];
  }

  std::mt19937 random_;
  std::array<schemas::MeshAxis, 4> order_{schemas::MeshAxis::tp, schemas::MeshAxis::cp,
                                          schemas::MeshAxis::dp, schemas::MeshAxis::pp};
};

}  // namespace strata::testing
