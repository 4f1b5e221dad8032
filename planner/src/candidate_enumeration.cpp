#include <algorithm>

#include "candidate.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/mesh_ranks.h"
#include "strata/schemas/plan_rules.h"

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

// The ZeRO stages and shard groups of a mesh: ZeRO over all of dp, and from ZeRO-1 on hybrid
// sharding within one node (FSDP2's HSDP, Megatron's distributed-optimizer instances) where dp
// spans several (`node_shard` > 0). Where dp·cp = 1 the dense state has no data-parallel ranks to
// shard over: ZeRO is left out of the search (a mixture of experts' state could still shard over
// tp's expert data-parallel ranks; the search does not try it).
std::vector<std::pair<int, std::int64_t>> zero_shardings(std::int64_t data_parallel_ranks,
                                                         std::int64_t node_shard,
                                                         schemas::TrainingFramework framework) {
  std::vector<std::pair<int, std::int64_t>> shardings{{0, 0}};
  for (int zero = 1; zero <= 3 && data_parallel_ranks > 1; ++zero) {
    shardings.emplace_back(zero, 0);
    // Megatron-LM's FSDP2 path has no hybrid form (megatron_arguments.h).
    const bool expressible = zero < 3 || framework == schemas::TrainingFramework::strata;
    if (expressible && node_shard > 0) shardings.emplace_back(zero, node_shard);
  }
  return shardings;
}

}  // namespace

std::vector<Knobs> enumerate(const schemas::ModelConfig& model,
                             const schemas::ClusterConfig& cluster, const SearchOptions& options,
                             const std::vector<MeshOrder>& orders, std::int64_t* rule_pruned,
                             const RefusalObserver& on_refused) {
  const std::int64_t world = cluster.world_size();
  const std::int64_t seq = options.seq_length;
  const std::int64_t max_tp = options.max_tp > 0 ? options.max_tp : 2 * cluster.gpus_per_node;
  const auto batch_of = [&](std::int64_t micro, std::int64_t dp) {
    return schemas::BatchConfig{seq, micro, options.global_batch_size,
                                options.global_batch_size / (micro * dp)};
  };
  const bool allowed[] = {
      std::count(options.schedules.begin(), options.schedules.end(), ScheduleType::gpipe) > 0,
      std::count(options.schedules.begin(), options.schedules.end(), ScheduleType::one_f_one_b) > 0,
      std::count(options.schedules.begin(), options.schedules.end(),
                 ScheduleType::interleaved_one_f_one_b) > 0,
      std::count(options.schedules.begin(), options.schedules.end(), ScheduleType::zb_h1) > 0};
  std::vector<Knobs> candidates;
  // The plan rules are asked once per level of the loops below, where the fields they read are
  // set, in validate_plan's order: the mesh against the model and the sequence, the batch, then
  // sequence parallelism, then the schedule. A candidate takes the first refusal above it.
  for (std::int64_t tp = 1; tp <= std::min(max_tp, world); tp *= 2) {
    for (std::int64_t cp = 1; cp <= 8 && tp * cp <= world; cp *= 2) {
      if (world % (tp * cp) != 0) continue;
      for (std::int64_t pp : divisors(world / (tp * cp))) {
        if (pp > model.num_layers || pp > schemas::kMaxPipelineStages) break;
        const std::int64_t dp = world / (tp * cp * pp);
        // Expert meshes are chosen to fit (expert_meshes_of): the rules see ep = etp = 1.
        const schemas::Mesh mesh{tp, cp, dp, pp};
        std::optional<schemas::PlanRefusal> mesh_refusal = schemas::mesh_model_refusal(mesh, model);
        if (!mesh_refusal) mesh_refusal = schemas::context_parallel_refusal(mesh, seq);
        const std::optional<schemas::PlanRefusal> sequence_parallel_refusals[] = {
            schemas::sequence_parallel_refusal(mesh, model, seq, false),
            schemas::sequence_parallel_refusal(mesh, model, seq, true)};
        // Where one sequence per dp rank does not divide the global batch, no micro-batch does:
        // the mesh's placements are not worth telling apart.
        const bool layout_ok =
            !mesh_refusal && !schemas::batch_refusal(batch_of(1, dp), mesh, model);
        const std::vector<std::pair<std::int32_t, std::int32_t>> expert_meshes =
            expert_meshes_of(model, tp * cp * dp, tp);
        const std::int64_t node_shard = node_shard_block(cluster, tp, cp, dp);
        std::vector<std::int64_t> dp_shards{0};
        if (node_shard > 0) dp_shards.push_back(node_shard);
        const std::vector<std::int16_t> placements =
            layout_ok
                ? distinct_orders(cluster, model, orders, tp, cp, dp, pp, dp_shards, expert_meshes)
                : std::vector<std::int16_t>{0};
        const std::vector<std::pair<int, std::int64_t>> shardings =
            zero_shardings(dp * cp, node_shard, options.framework);
        for (std::int64_t micro = 1; micro <= 16; micro *= 2) {
          const schemas::BatchConfig batch = batch_of(micro, dp);
          const std::optional<schemas::PlanRefusal> batch_refusal =
              mesh_refusal ? mesh_refusal : schemas::batch_refusal(batch, mesh, model);
          // Interleaving's rule for the model chunks the loop below tries (vpp > 1 each).
          schemas::Mesh chunked = mesh;
          chunked.vpp = 2;
          const std::optional<schemas::PlanRefusal> interleaving_refusal =
              schemas::schedule_refusal(ScheduleType::interleaved_one_f_one_b, chunked, batch);
          for (std::int16_t order : placements) {
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
                    const std::optional<schemas::PlanRefusal>* refusal =
                        batch_refusal                    ? &batch_refusal
                        : sequence_parallel_refusals[sp] ? &sequence_parallel_refusals[sp]
                        : schedule == ScheduleType::interleaved_one_f_one_b ? &interleaving_refusal
                                                                            : nullptr;
                    if (refusal && *refusal) {
                      ++*rule_pruned;
                      if (on_refused) on_refused(knobs, **refusal);
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
