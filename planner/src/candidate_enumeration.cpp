#include <algorithm>

#include "candidate.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::planner::search {

using schemas::RecomputeGranularity;
using schemas::ScheduleType;

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> found;
  for (std::int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) found.push_back(d);
  }
  return found;
}

namespace {

// A mixture of experts' expert meshes over a stage of `stage_ranks`: every ep dividing the
// experts and the ranks, with etp 1 (each expert whole, Megatron-Core's advice for fine-grained
// experts) or etp = tp (the experts split as the dense MLP is) where tp divides their width.
// A dense model has the one mesh (1, 1).
std::vector<std::pair<std::int32_t, std::int32_t>> expert_meshes_of(
    const schemas::ModelConfig& model, std::int64_t stage_ranks, std::int64_t tp) {
  if (!model.moe) return {{1, 1}};
  std::vector<std::int64_t> etps{1};
  if (tp > 1 && model.moe->expert_ffn_hidden_size % tp == 0) etps.push_back(tp);
  std::vector<std::pair<std::int32_t, std::int32_t>> meshes;
  for (const std::int64_t etp : etps) {
    if (stage_ranks % etp != 0) continue;
    for (const std::int64_t ep : divisors(model.moe->num_experts)) {
      if ((stage_ranks / etp) % ep == 0) {
        meshes.emplace_back(static_cast<std::int32_t>(ep), static_cast<std::int32_t>(etp));
      }
    }
  }
  return meshes;
}

}  // namespace

std::vector<Knobs> enumerate(const schemas::ModelConfig& model,
                             const schemas::ClusterConfig& cluster, const SearchOptions& options,
                             const std::vector<MeshOrder>& orders, std::int64_t* rule_pruned) {
  const std::int64_t world = cluster.world_size();
  const std::int64_t seq = options.seq_length;
  const std::int64_t max_tp = options.max_tp > 0 ? options.max_tp : 2 * cluster.gpus_per_node;
  const bool allowed[] = {
      std::count(options.schedules.begin(), options.schedules.end(), ScheduleType::gpipe) > 0,
      std::count(options.schedules.begin(), options.schedules.end(), ScheduleType::one_f_one_b) > 0,
      std::count(options.schedules.begin(), options.schedules.end(),
                 ScheduleType::interleaved_one_f_one_b) > 0,
      std::count(options.schedules.begin(), options.schedules.end(), ScheduleType::zb_h1) > 0};
  std::vector<Knobs> candidates;
  for (std::int64_t tp = 1; tp <= std::min(max_tp, world); tp *= 2) {
    const bool tp_ok = model.num_attention_heads % tp == 0 && model.ffn_hidden_size % tp == 0 &&
                       (model.num_kv_heads % tp == 0 || tp % model.num_kv_heads == 0) &&
                       (!model.moe || model.moe->num_shared_experts == 0 ||
                        model.moe->shared_expert_ffn_hidden_size % tp == 0);
    for (std::int64_t cp = 1; cp <= 8 && tp * cp <= world; cp *= 2) {
      if (world % (tp * cp) != 0) continue;
      for (std::int64_t pp : divisors(world / (tp * cp))) {
        if (pp > model.num_layers || pp > schemas::kMaxPipelineStages) break;
        const std::int64_t dp = world / (tp * cp * pp);
        const bool layout_ok =
            tp_ok && (cp == 1 || seq % (2 * cp) == 0) && options.global_batch_size % dp == 0;
        const std::vector<std::pair<std::int32_t, std::int32_t>> expert_meshes =
            expert_meshes_of(model, tp * cp * dp, tp);
        const std::int64_t node_shard = node_shard_block(cluster, tp, cp, dp);
        std::vector<std::int64_t> dp_shards{0};
        if (node_shard > 0) dp_shards.push_back(node_shard);
        const std::vector<std::int16_t> placements =
            layout_ok
                ? distinct_orders(cluster, model, orders, tp, cp, dp, pp, dp_shards, expert_meshes)
                : std::vector<std::int16_t>{0};
        for (std::int64_t micro = 1; micro <= 16; micro *= 2) {
          for (std::int16_t order : placements) {
            // ZeRO over all of dp, and from ZeRO-1 on hybrid sharding within one node (FSDP2's
            // HSDP, Megatron's distributed-optimizer instances) where dp spans several.
            std::vector<std::pair<int, std::int64_t>> shardings{{0, 0}};
            for (int zero = 1; zero <= 3; ++zero) {
              shardings.emplace_back(zero, 0);
              // Megatron-LM's FSDP2 path has no hybrid form (megatron_arguments.h).
              const bool expressible =
                  zero < 3 || options.framework == schemas::TrainingFramework::strata;
              if (expressible && node_shard > 0) shardings.emplace_back(zero, node_shard);
            }
            for (const auto& [zero, dp_shard] : shardings) {
              for (RecomputeGranularity recompute :
                   {RecomputeGranularity::none, RecomputeGranularity::selective,
                    RecomputeGranularity::full}) {
                for (bool sp : {false, true}) {
                  auto add = [&](ScheduleType schedule, std::int64_t vpp) {
                    Knobs knobs{static_cast<std::int32_t>(tp),
                                static_cast<std::int32_t>(cp),
                                static_cast<std::int32_t>(pp),
                                static_cast<std::int32_t>(dp),
                                static_cast<std::int32_t>(vpp),
                                static_cast<std::int32_t>(micro),
                                static_cast<std::int8_t>(zero),
                                static_cast<std::int32_t>(dp_shard),
                                recompute,
                                sp,
                                schedule,
                                order};
                    const std::int64_t per_step = micro * dp;
                    // A mixture of experts with tp needs sequence parallelism (schemas/plan.h).
                    const bool ok = layout_ok && options.global_batch_size % per_step == 0 &&
                                    (!sp || (tp > 1 && (seq / cp) % tp == 0)) &&
                                    (!model.moe || tp == 1 || sp) && (zero == 0 || dp * cp > 1) &&
                                    (schedule != ScheduleType::interleaved_one_f_one_b ||
                                     (options.global_batch_size / per_step) % pp == 0);
                    if (!ok) {
                      ++*rule_pruned;
                      return;
                    }
                    for (const auto& [ep, etp] : expert_meshes) {
                      knobs.ep = ep;
                      knobs.etp = etp;
                      candidates.push_back(knobs);
                    }
                  };
                  if (allowed[1]) add(ScheduleType::one_f_one_b, 1);
                  if (pp > 1 && allowed[3]) add(ScheduleType::zb_h1, 1);
                  if (pp > 1 && allowed[0]) add(ScheduleType::gpipe, 1);
                  if (pp > 1 && allowed[2]) {
                    for (std::int64_t vpp : divisors(model.num_layers / pp)) {
                      if (vpp > 1 && model.num_layers % pp == 0 &&
                          pp * vpp <= schemas::kMaxPipelineStages) {
                        add(ScheduleType::interleaved_one_f_one_b, vpp);
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return candidates;
}

}  // namespace strata::planner::search
