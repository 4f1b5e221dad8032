#include "strata/planner/plan_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "strata/costmodels/activation_memory.h"
#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/mesh_placement.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/costmodels/plan_costs.h"
#include "strata/planner/layer_split.h"
#include "strata/planner/mesh_orders.h"
#include "strata/schedule/micro_batches_in_flight.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/mesh_ranks.h"
#include "thread_shares.h"

namespace strata::planner {
namespace {

using schemas::MeshAxis;
using schemas::RecomputeGranularity;
using schemas::ScheduleType;

// One candidate, small enough to keep hundreds of thousands of them.
struct Knobs {
  std::int32_t tp = 1, cp = 1, pp = 1, dp = 1, vpp = 1, micro_batch = 1;
  std::int8_t zero = 0;
  std::int32_t dp_shard = 0;  // hybrid sharding's shard group in dp ranks; 0: all of dp
  RecomputeGranularity recompute = RecomputeGranularity::none;
  bool sequence_parallel = false;
  ScheduleType schedule = ScheduleType::one_f_one_b;
  std::int16_t order = 0;        // index into the search's distinct orders
  std::int32_t ep = 1, etp = 1;  // the expert mesh of a mixture of experts
};

// `executor`: the strata framework's executor would refuse the plan (schemas/executor_admission.h).
enum class Verdict { ok, rules, executor, duplicate, model_states, activations };

struct Scored {
  double lower_bound_s = 0;
  std::size_t index = 0;  // into the candidate list: ties break by it, so output is deterministic
};

struct Deficit {
  double peak_bytes = 0;
  std::size_t index = 0;
  Verdict verdict = Verdict::ok;
};

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> found;
  for (std::int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) found.push_back(d);
  }
  return found;
}

class Evaluator {
 public:
  Evaluator(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
            const SearchOptions& options, const std::vector<MeshOrder>& orders, double capacity)
      : orders_(orders), capacity_(capacity), counts_(costmodels::count_parameters(model)) {
    if (model.moe) {
      representative_layer_ = model.moe->first_dense_layers + model.moe->moe_layer_interval - 1;
    }
    plan_.model = model;
    plan_.cluster = cluster;
    plan_.precision = options.precision;
    plan_.gradient_dtype = options.gradient_dtype;
    plan_.framework = options.framework;
    plan_.batch.seq_length = options.seq_length;
    plan_.batch.global_batch_size = options.global_batch_size;
    states_ = costmodels::plan_model_state_dtypes(plan_);
  }

  // Sets the working plan to `knobs` with its best layer split. `peak_bytes` gets the memory
  // lower bound of the fullest rank when memory is what fails.
  Verdict build(const Knobs& knobs, double* peak_bytes) {
    schemas::Plan& plan = plan_;
    plan.mesh = {knobs.tp,       knobs.cp, knobs.dp, knobs.pp, knobs.vpp, orders_[knobs.order],
                 knobs.dp_shard, knobs.ep, knobs.etp};
    plan.batch.micro_batch_size = knobs.micro_batch;
    plan.batch.num_micro_batches = plan.batch.global_batch_size / (knobs.micro_batch * knobs.dp);
    plan.sequence_parallel = knobs.sequence_parallel;
    plan.zero_stage = knobs.zero;
    plan.recompute = {knobs.recompute, {}, {}};
    plan.schedule = {knobs.schedule, {}};
    // The expert all-to-alls run beside another micro-batch's compute where the stack can
    // (Megatron-Core's combined 1F1B). Only under the interleaved schedule, whose steady state
    // already holds the paired micro-batches: without pipelining the pairing keeps a second
    // micro-batch's activations alive, which the memory model does not count.
    plan.ep_comm_overlap = plan.model.moe && knobs.ep * knobs.etp > 1 && knobs.pp > 1 &&
                           knobs.vpp > 1 && knobs.recompute != RecomputeGranularity::full &&
                           schemas::overlaps_expert_dispatch(plan.framework);
    // What the planner emits for the strata framework is what its executor runs: one rule.
    if (plan.framework == schemas::TrainingFramework::strata) {
      if (std::optional<schemas::ExecutorRefusal> refusal = schemas::executor_refusal(plan)) {
        refusal_ = std::move(refusal);
        return Verdict::executor;
      }
    }

    const std::int64_t pp = knobs.pp;
    const std::int64_t vpp = knobs.vpp;
    const std::int64_t m = plan.batch.num_micro_batches;
    const std::int64_t layers = plan.model.num_layers;
    plan.cp_comm = schemas::ContextParallelComm::ring;
    placement_ = &placement_of(knobs);
    costmodels::LayerContext context = costmodels::layer_context(plan, placement_);
    if (knobs.cp > 1) choose_cp_comm(context);
    const costmodels::LayerCostSet& costs = layer_costs(context);
    // The layer split balances identical layers: a mixture of experts' are its MoE layers (all
    // or nearly all of them; DeepSeek-V3 keeps 3 of 61 dense). The simulation of the chosen
    // candidates prices every layer as it is.
    const bool moe_layers = counts_.num_moe_layers > 0;
    const costmodels::PassCosts& layer = moe_layers ? costs.moe_recomputed : costs.recomputed;
    const costmodels::LayerActivationBytes& activations =
        moe_layers ? costs.moe_recomputed_activations : costs.recomputed_activations;
    plain_activations_ = moe_layers ? &costs.moe_plain_activations : &costs.plain_activations;
    recomputed_activations_ = &activations;
    const costmodels::PassCosts& embedding = costs.embedding;
    const costmodels::PassCosts& head = costs.lm_head;

    // Model-state bytes of the parameters a rank holds, after ZeRO sharding over their shard
    // group (dp·cp without hybrid sharding; a MoE layer's routed experts over the expert
    // data-parallel group), per layer and with the embedding or the LM head. ZeRO-3 holds a
    // stage's gathered 16-bit weights while it runs (gathered layer by layer, two layers at a
    // time: left out of this lower bound).
    const double gathered =
        knobs.zero == 3 && !context.zero3_layer_gathers
            ? static_cast<double>(
                  costmodels::adam_model_state_bytes(states_.states, states_.gradients).weights)
            : 0.0;
    const double state_bytes = costmodels::rank_state_memory(
                                   states_.states, states_.gradients, knobs.zero,
                                   static_cast<double>(plan.mesh.zero_shard_dp() * knobs.cp), 1.0)
                                   .total() +
                               gathered;
    const double expert_state_bytes =
        costmodels::rank_state_memory(states_.states, states_.gradients, knobs.zero,
                                      static_cast<double>(plan.mesh.expert_zero_shards()), 1.0)
            .total() +
        gathered;
    const auto state_of = [&](std::int64_t first_layer, std::int64_t layers_held, bool embedding,
                              bool head) {
      const costmodels::RankParameters held = costmodels::stage_parameters(
          plan.model, counts_, plan.mesh, {first_layer, layers_held, embedding, head});
      return held.dense * state_bytes + held.expert * expert_state_bytes;
    };
    const double layer_state = state_of(representative_layer_, 1, false, false);
    const double embedding_state = state_of(0, 0, true, false);
    const double head_state =
        pp * vpp == 1 ? state_of(0, 0, true, true) - embedding_state : state_of(0, 0, false, true);

    // Model states alone, evenly spread, already too much: nothing below can fit.
    const double total_state = state_of(0, layers, true, true);
    if (total_state / static_cast<double>(pp) > capacity_) {
      *peak_bytes = total_state / static_cast<double>(pp);
      return Verdict::model_states;
    }

    plan.stages.clear();
    if (vpp == 1) {
      std::vector<StageShape> shapes(static_cast<std::size_t>(pp));
      for (std::int64_t s = 0; s < pp; ++s) {
        StageShape& shape = shapes[static_cast<std::size_t>(s)];
        const double held = static_cast<double>(
            schedule::peak_micro_batches_in_flight(knobs.schedule, pp, 1, m, s));
        shape.memory_per_layer_bytes = layer_state + held * activations.stored;
        shape.min_layers = (s == 0 || s == pp - 1) ? 0 : 1;
        if (s == 0) {
          shape.fixed_s += embedding.forward_backward_s();
          shape.memory_fixed_bytes += embedding_state;
        }
        if (s == pp - 1) {
          shape.fixed_s += head.forward_backward_s();
          shape.memory_fixed_bytes += head_state;
        }
      }
      if (pp == 1) shapes[0].min_layers = layers;
      const std::optional<LayerSplit> split =
          best_layer_split(layers, layer.forward_backward_s(), shapes, capacity_);
      if (!split) {
        // Report the even split's fullest stage.
        double worst = 0;
        for (std::int64_t s = 0; s < pp; ++s) {
          const StageShape& shape = shapes[static_cast<std::size_t>(s)];
          worst = std::max(worst, shape.memory_fixed_bytes + shape.memory_per_layer_bytes *
                                                                 static_cast<double>(layers) /
                                                                 static_cast<double>(pp));
        }
        *peak_bytes = worst;
        return Verdict::activations;
      }
      std::int64_t next = 0;
      for (std::int64_t s = 0; s < pp; ++s) {
        const std::int64_t n = split->layers[static_cast<std::size_t>(s)];
        plan.stages.push_back({next, n, s == 0, s == pp - 1});
        next += n;
      }
      if (knobs.recompute == RecomputeGranularity::full &&
          !fewest_recomputed_layers(knobs, shapes, layer_state, m)) {
        return Verdict::duplicate;  // recomputing nothing is the candidate without recompute
      }
    } else {
      if (layers % (pp * vpp) != 0) return Verdict::rules;
      plan.stages = schemas::even_pipeline_stages(layers, pp * vpp);
      const double chunk_layers = static_cast<double>(layers / (pp * vpp));
      double worst = 0;
      for (std::int64_t r = 0; r < pp; ++r) {
        double bytes = chunk_layers * static_cast<double>(vpp) * layer_state +
                       static_cast<double>(
                           schedule::peak_micro_batches_in_flight(knobs.schedule, pp, vpp, m, r)) *
                           chunk_layers * activations.stored;
        if (r == 0) bytes += embedding_state;
        if (r == pp - 1) bytes += head_state;
        worst = std::max(worst, bytes);
      }
      if (worst > capacity_) {
        *peak_bytes = worst;
        return Verdict::activations;
      }
    }
    return Verdict::ok;
  }

  // A lower bound on the simulated step (see the header): every rank waits for its first input and
  // then computes all its passes one after another; 1F1B and GPipe also wait for the last
  // micro-batch's gradient to walk back to the first stage; TIED_GRAD and STEP come after.
  double lower_bound(const costmodels::PlanCosts& costs) const {
    const schemas::Plan& plan = plan_;
    const std::size_t pp = static_cast<std::size_t>(plan.mesh.pp);
    const double m = static_cast<double>(plan.batch.num_micro_batches);
    std::vector<double> first_start(pp, 0.0);
    std::vector<double> finish(pp, 0.0);
    for (std::size_t s = 1; s < pp; ++s) {
      const costmodels::StageCosts& before = costs.stages[s - 1];
      first_start[s] = first_start[s - 1] + before.passes.forward.total_s() + before.send_forward_s;
    }
    std::vector<double> work(pp, 0.0);
    for (std::size_t s = 0; s < costs.stages.size(); ++s) {
      work[s % pp] += m * costs.stages[s].passes.forward_backward_s();
    }
    double bound = 0;
    for (std::size_t r = 0; r < pp; ++r) {
      finish[r] = first_start[r] + work[r];
      bound = std::max(bound, finish[r]);
    }
    const ScheduleType type = plan.schedule.type;
    if (plan.mesh.vpp == 1 && (type == ScheduleType::one_f_one_b || type == ScheduleType::gpipe)) {
      double chain = finish[pp - 1];
      for (std::size_t s = pp - 1; s-- > 0;) {
        chain += costs.stages[s + 1].send_backward_s + costs.stages[s].passes.backward_s();
      }
      bound = std::max(bound, chain);
    }
    if (costs.tied_embedding_grad_s > 0) {
      bound = std::max(bound, std::max(finish[0], finish[pp - 1]) + costs.tied_embedding_grad_s);
    }
    return bound + *std::max_element(costs.optimizer_step_s.begin(), costs.optimizer_step_s.end());
  }

  schemas::Plan& plan() { return plan_; }

  // Where the working plan's groups sit on the network (set by build()).
  const costmodels::MeshPlacement& placement() const { return *placement_; }

  // Why the last candidate build() gave Verdict::executor was refused.
  const std::optional<schemas::ExecutorRefusal>& refusal() const { return refusal_; }

  // The working plan's layer costs, from the cache filled by build().
  const costmodels::LayerCostSet& current_layer_costs() const { return *current_; }

  // How cp attention communicates is the planner's to choose (schemas/plan.h): the all-gather
  // variant where a layer takes less with it — what it exposes against what the ring cannot hide
  // behind the attention, and the ring's extra additions of partial sums. A tie keeps the ring,
  // which holds 5 blocks of keys and values where the gather holds 2·cp + 2. Memory does not
  // enter the choice: a layout whose gather would not fit while its ring would is judged by the
  // gather (rare: the gap is a few K/V blocks of one layer).
  void choose_cp_comm(costmodels::LayerContext& context) {
    const auto layer_s = [](const costmodels::PassCosts& layer) {
      return layer.forward.total_s() + layer.backward_input.total_s() + layer.recompute.total_s();
    };
    const double ring_s = layer_s(layer_costs(context).recomputed);
    costmodels::LayerContext gathered = context;
    gathered.cp_comm = schemas::ContextParallelComm::all_gather;
    if (layer_s(layer_costs(gathered).recomputed) < ring_s) {
      context = gathered;
      plan_.cp_comm = schemas::ContextParallelComm::all_gather;
    }
  }

  // Layer costs depend only on the context (tp, cp, sequence parallelism, micro-batch,
  // recompute, and where the tp and cp groups sit on the network): computed once per distinct
  // context and reused by every candidate that shares it.
  const costmodels::LayerCostSet& layer_costs(const costmodels::LayerContext& context) {
    auto key = std::make_tuple(
        context.tp, context.cp, context.sequence_parallel, context.micro_batch_size,
        context.recompute, context.tp_span, context.cp_tier, context.zero3_layer_gathers,
        context.zero3_layer_gathers ? context.dp_span : costmodels::GroupSpan{},
        context.zero3_layer_gathers && context.replica_span ? *context.replica_span
                                                            : costmodels::GroupSpan{},
        context.cp_comm,
        context.cp_comm == schemas::ContextParallelComm::all_gather ? context.cp_span
                                                                    : costmodels::GroupSpan{},
        context.ep, context.etp, context.ep_span, context.etp_span,
        context.zero3_layer_gathers ? context.expert_zero_span : costmodels::GroupSpan{},
        context.ep_comm_overlap);
    auto found = cache_.find(key);
    if (found == cache_.end()) {
      found = cache_.emplace(std::move(key), costmodels::layer_cost_set(context)).first;
    }
    current_ = &found->second;
    return found->second;
  }

  void use_even_split() {
    plan_.stages =
        schemas::even_pipeline_stages(plan_.model.num_layers, plan_.mesh.pp * plan_.mesh.vpp);
    plan_.recompute.full_layers_per_stage.clear();
  }

 private:
  // Full recomputation of only as many layers per stage as memory needs: the rest keep their
  // activations and skip the extra forward. False when no layer needs it.
  bool fewest_recomputed_layers(const Knobs& knobs, const std::vector<StageShape>& shapes,
                                double state_per_layer, std::int64_t m) {
    const costmodels::LayerActivationBytes& plain = *plain_activations_;
    const costmodels::LayerActivationBytes& full = *recomputed_activations_;
    std::vector<std::int64_t> recomputed;
    bool partial = false;
    bool any = false;
    for (std::size_t s = 0; s < plan_.stages.size(); ++s) {
      const std::int64_t n = plan_.stages[s].num_layers;
      const double held = static_cast<double>(schedule::peak_micro_batches_in_flight(
          knobs.schedule, knobs.pp, 1, m, static_cast<std::int64_t>(s)));
      const double base = shapes[s].memory_fixed_bytes + static_cast<double>(n) * state_per_layer +
                          held * static_cast<double>(n) * plain.stored;
      const double saved_per_layer = held * (plain.stored - full.stored);
      std::int64_t k = 0;
      if (base > capacity_ && saved_per_layer > 0) {
        k = std::min(n, static_cast<std::int64_t>(std::ceil((base - capacity_) / saved_per_layer)));
      } else if (base > capacity_) {
        k = n;
      }
      partial = partial || k < n;
      any = any || k > 0;
      recomputed.push_back(k);
    }
    if (partial) plan_.recompute.full_layers_per_stage = std::move(recomputed);
    return any;
  }

  const std::vector<MeshOrder>& orders_;
  double capacity_;
  costmodels::ParameterBreakdown counts_;
  // What the model states are kept in (costmodels::model_state_dtypes).
  costmodels::ModelStateDtypes states_;
  std::optional<schemas::ExecutorRefusal> refusal_;  // the last Verdict::executor's reason
  schemas::Plan plan_;
  // One placement per distinct mesh (sizes, order, hybrid shards, expert mesh): what every
  // candidate of that mesh reads.
  const costmodels::MeshPlacement& placement_of(const Knobs& knobs) {
    const auto key = std::make_tuple(knobs.tp, knobs.cp, knobs.dp, knobs.pp, knobs.order,
                                     knobs.dp_shard, knobs.ep, knobs.etp);
    auto found = placements_.find(key);
    if (found == placements_.end()) {
      found = placements_
                  .emplace(key, costmodels::mesh_placement(plan_.cluster, plan_.mesh, plan_.model))
                  .first;
    }
    return found->second;
  }
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t, std::int32_t, std::int16_t,
                      std::int32_t, std::int32_t, std::int32_t>,
           costmodels::MeshPlacement>
      placements_;
  const costmodels::MeshPlacement* placement_ = nullptr;
  std::map<
      std::tuple<std::int64_t, std::int64_t, bool, std::int64_t, RecomputeGranularity,
                 costmodels::GroupSpan, int, bool, costmodels::GroupSpan, costmodels::GroupSpan,
                 schemas::ContextParallelComm, costmodels::GroupSpan, std::int64_t, std::int64_t,
                 costmodels::GroupSpan, costmodels::GroupSpan, costmodels::GroupSpan, bool>,
      costmodels::LayerCostSet>
      cache_;
  const costmodels::LayerCostSet* current_ = nullptr;
  // The layers the split balances (the MoE layers' of a mixture of experts), set by build().
  const costmodels::LayerActivationBytes* plain_activations_ = nullptr;
  const costmodels::LayerActivationBytes* recomputed_activations_ = nullptr;
  // A layer whose parameters stand for every layer's in the memory bounds: the first MoE layer of
  // a mixture of experts, else the first.
  std::int64_t representative_layer_ = 0;
};

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

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

double peak_memory_bytes(const RankedPlan& ranked) {
  double peak = 0;
  for (const simulator::RankMemory& memory : ranked.memory)
    peak = std::max(peak, memory.peak_bytes);
  return peak;
}

std::string describe_bottleneck(const schemas::Plan& plan, const simulator::StepMetrics& metrics) {
  const simulator::TimeBreakdown& time = metrics.breakdown;
  const double step = metrics.step_time_s;
  const auto crosses = [&](std::vector<MeshAxis> axes) {
    const costmodels::GroupSpan span = costmodels::group_span(
        plan.cluster, costmodels::first_group_ranks(plan.mesh, std::move(axes)));
    return span.outermost_tier() > 0 ? " crosses nodes" : "";
  };
  struct Part {
    double seconds;
    std::string words;
  };
  const std::vector<Part> parts{
      {time.bubble_s, "pipeline bubble"},
      {time.tp_comm_s,
       fmt::format("tp {}{}", plan.sequence_parallel ? "all-gather/reduce-scatter" : "all-reduce",
                   crosses({MeshAxis::tp}))},
      {time.cp_comm_s, fmt::format("cp ring exchange{}", crosses({MeshAxis::cp}))},
      {time.ep_comm_s, "expert all-to-all"},
      {time.host_issue_s, "the host issuing kernels"},
      {time.pp_comm_s, "pipeline sends"},
      {time.dp_comm_s,
       fmt::format("dp gradient reduction{}", crosses({MeshAxis::dp, MeshAxis::cp}))},
      {time.recompute_s, "recomputation"},
      {time.optimizer_s, "optimizer step"}};
  const Part* largest = &parts[0];
  for (const Part& part : parts) {
    if (part.seconds > largest->seconds) largest = &part;
  }
  if (largest->seconds < 0.03 * step) return "compute-bound";
  return fmt::format("{} {:.0f}%", largest->words, 100 * largest->seconds / step);
}

namespace {

// What every phase of a search reads.
struct SearchContext {
  const schemas::ModelConfig& model;
  const schemas::ClusterConfig& cluster;
  const SearchOptions& options;
  const std::vector<MeshOrder>& orders;
  double capacity = 0;
  unsigned threads = 1;
};

// Scoring every candidate: those that pass the rules and fit by the memory bounds, by (bound,
// index); the nearest of those that do not fit, for explaining a search that finds none.
struct Scores {
  std::vector<Scored> scored;
  std::vector<Deficit> deficits;
  // The executor's refusal of the first candidate it refused (by index: whatever the threads).
  std::optional<schemas::ExecutorRefusal> refusal;
};

Scores score_candidates(const SearchContext& context, const std::vector<Knobs>& candidates,
                        SearchStatistics& stats) {
  // Each share scores an interleaved part of the candidates into its own lists; merging sorts
  // by (bound, index), so the result does not depend on the number of threads.
  struct Share {
    std::vector<Scored> scored;
    std::vector<Deficit> deficits;
    std::int64_t rules = 0, executor = 0, duplicates = 0, model_states = 0, activations = 0;
    std::optional<schemas::ExecutorRefusal> refusal;  // of this share's first refused candidate
    std::size_t refusal_index = 0;
  };
  std::vector<Share> shares(context.threads);
  std::atomic<std::size_t> done{0};
  const SearchOptions& options = context.options;
  const auto score = [&](unsigned thread) {
    Evaluator evaluator(context.model, context.cluster, options, context.orders, context.capacity);
    Share& share = shares[thread];
    for (std::size_t i = thread; i < candidates.size(); i += context.threads) {
      double peak = 0;
      const Verdict verdict = evaluator.build(candidates[i], &peak);
      if (verdict == Verdict::ok) {
        const costmodels::PlanCosts costs =
            costmodels::plan_costs(evaluator.plan(), &evaluator.current_layer_costs(),
                                   costmodels::CostDetail::step_bound, &evaluator.placement());
        share.scored.push_back({evaluator.lower_bound(costs), i});
      } else if (options.exhaustive &&
                 (verdict == Verdict::model_states || verdict == Verdict::activations)) {
        share.scored.push_back({0.0, i});  // simulated anyway: the test of the pruning
      } else if (verdict == Verdict::rules) {
        ++share.rules;
      } else if (verdict == Verdict::executor) {
        ++share.executor;
        if (!share.refusal) {
          share.refusal = evaluator.refusal();
          share.refusal_index = i;
        }
      } else if (verdict == Verdict::duplicate) {
        ++share.duplicates;
      } else {
        (verdict == Verdict::model_states ? share.model_states : share.activations)++;
        share.deficits.push_back({peak, i, verdict});
        // Keep only the nearest few.
        if (share.deficits.size() > 64) {
          std::nth_element(share.deficits.begin(), share.deficits.begin() + 16,
                           share.deficits.end(), [](const Deficit& a, const Deficit& b) {
                             return std::tie(a.peak_bytes, a.index) <
                                    std::tie(b.peak_bytes, b.index);
                           });
          share.deficits.resize(16);
        }
      }
      done.fetch_add(1, std::memory_order_relaxed);
    }
  };
  run_thread_shares(context.threads, score,
                    options.progress ? std::function<void()>([&] {
                      options.progress(done.load(), candidates.size());
                    })
                                     : std::function<void()>());
  Scores scores;
  std::size_t first_refused = candidates.size();
  for (Share& share : shares) {
    scores.scored.insert(scores.scored.end(), share.scored.begin(), share.scored.end());
    scores.deficits.insert(scores.deficits.end(), share.deficits.begin(), share.deficits.end());
    stats.pruned_by_rules += share.rules;
    stats.pruned_by_executor += share.executor;
    if (share.refusal && share.refusal_index < first_refused) {
      first_refused = share.refusal_index;
      scores.refusal = std::move(share.refusal);
    }
    stats.pruned_as_duplicates += share.duplicates;
    stats.pruned_by_model_states += share.model_states;
    stats.pruned_by_activations += share.activations;
  }
  stats.estimated = static_cast<std::int64_t>(scores.scored.size());
  std::sort(scores.scored.begin(), scores.scored.end(), [](const Scored& a, const Scored& b) {
    return std::tie(a.lower_bound_s, a.index) < std::tie(b.lower_bound_s, b.index);
  });
  return scores;
}

bool equivalent(double a, double b) {
  return std::fabs(a - b) <= kEquivalentTolerance * std::max(std::fabs(a), std::fabs(b));
}

// Which of two equivalent plans shows their answer: fewer parallel axes, then no context
// parallelism, then the default mesh order (lower is simpler).
std::tuple<int, bool, bool> complexity(const schemas::Plan& plan) {
  const schemas::Mesh& mesh = plan.mesh;
  const int axes = (mesh.tp > 1) + (mesh.cp > 1) + (mesh.pp > 1) + (mesh.dp > 1) + (mesh.ep > 1) +
                   (mesh.etp > 1);
  return {axes, mesh.cp > 1, mesh.order != schemas::Mesh{}.order};
}

// The mesh a row of the ranking stands for: its parallel sizes. Its variants — other pipeline
// interleavings, micro-batches, ZeRO stages, recomputation, schedules and mesh orders on the same
// sizes — are one answer to a user choosing a layout, counted on the row.
using MeshSizes = std::array<std::int64_t, 6>;
MeshSizes mesh_sizes(const schemas::Mesh& mesh) {
  return {mesh.tp, mesh.cp, mesh.pp, mesh.dp, mesh.ep, mesh.etp};
}
MeshSizes mesh_sizes(const Knobs& knobs) {
  return {knobs.tp, knobs.cp, knobs.pp, knobs.dp, knobs.ep, knobs.etp};
}

// Adds a simulated plan to the ranking: as its own row, or (unless every variant is its own row)
// in place of its mesh's row when it is faster — or as fast, with the same peak memory, and
// simpler. Rows keep the order their first plan arrived in: the (bound, index) order.
void keep_answer(RankedPlan ranked, bool all_variants, std::vector<RankedPlan>& kept) {
  if (!all_variants) {
    for (RankedPlan& row : kept) {
      if (mesh_sizes(row.plan.mesh) != mesh_sizes(ranked.plan.mesh)) continue;
      const bool tie = equivalent(row.metrics.step_time_s, ranked.metrics.step_time_s);
      const bool faster = !tie && ranked.metrics.step_time_s < row.metrics.step_time_s;
      const bool simpler = tie && equivalent(peak_memory_bytes(row), peak_memory_bytes(ranked)) &&
                           complexity(ranked.plan) < complexity(row.plan);
      if (faster || simpler) row = std::move(ranked);
      return;
    }
  }
  kept.push_back(std::move(ranked));
}

// Branch and bound: simulates the scored candidates in order of their bound, a batch at a time
// across the threads, until the next bound cannot beat the K-th best simulated step. Returns the
// best K; candidates that overflow memory in simulation go to `over_memory`.
std::vector<RankedPlan> simulate_best(const SearchContext& context,
                                      const std::vector<Knobs>& candidates,
                                      const std::vector<Scored>& scored, SearchStatistics& stats,
                                      std::vector<NearMiss>& over_memory) {
  const SearchOptions& options = context.options;
  std::vector<RankedPlan> kept;
  // How many layouts of each mesh fit by the bounds: a row's variants are the others.
  std::map<MeshSizes, std::int64_t> layouts_of_mesh;
  if (!options.all_variants) {
    for (const Scored& candidate : scored)
      ++layouts_of_mesh[mesh_sizes(candidates[candidate.index])];
  }
  // A fixed batch size (not the thread count) keeps even the statistics independent of threads.
  const std::size_t batch = 8;
  for (std::size_t next = 0; next < scored.size();) {
    // Distinct answers simulate the candidates whose bound ties the K-th as well: any of them may
    // be a variant of it (and the simplest one), so the K-th answer is complete.
    if (!options.exhaustive && kept.size() >= options.top_k) {
      const double kth_s = kept[options.top_k - 1].metrics.step_time_s;
      if (options.all_variants ? scored[next].lower_bound_s >= kth_s
                               : scored[next].lower_bound_s > kth_s * (1 + kEquivalentTolerance)) {
        break;
      }
    }
    const std::size_t end = std::min(scored.size(), next + batch);
    std::vector<std::optional<RankedPlan>> simulated(end - next);
    std::vector<std::optional<NearMiss>> misses(end - next);
    run_thread_shares(context.threads, [&](unsigned thread) {
      Evaluator evaluator(context.model, context.cluster, options, context.orders,
                          context.capacity);
      for (std::size_t i = next + thread; i < end; i += context.threads) {
        double peak = 0;
        if (evaluator.build(candidates[scored[i].index], &peak) != Verdict::ok) {
          evaluator.use_even_split();  // exhaustive mode: a candidate the pruning dropped
        }
        schemas::Plan plan = evaluator.plan();
        schemas::validate_plan(plan, schemas::JsonLocation("planner"));
        const simulator::PlanSimulation simulation = simulator::simulate_plan(plan, {});
        double peak_bytes = 0;
        for (const simulator::RankMemory& memory : simulation.result.memory) {
          peak_bytes = std::max(peak_bytes, memory.peak_bytes);
        }
        if (peak_bytes > context.capacity) {
          misses[i - next] = NearMiss{std::move(plan), peak_bytes, context.capacity, "activations"};
          continue;
        }
        plan.predicted = schemas::PredictedMetrics{simulation.metrics.step_time_s,
                                                   simulation.metrics.tokens_per_s,
                                                   simulation.metrics.mfu,
                                                   {},
                                                   std::string("strata plan")};
        for (const simulator::RankMemory& memory : simulation.result.memory) {
          plan.predicted->peak_memory_bytes_per_pipeline_rank.push_back(
              static_cast<std::int64_t>(std::ceil(memory.peak_bytes)));
        }
        RankedPlan ranked{std::move(plan), simulation.metrics, simulation.result.memory, "",
                          scored[i].lower_bound_s};
        ranked.bottleneck = describe_bottleneck(ranked.plan, ranked.metrics);
        simulated[i - next] = std::move(ranked);
      }
    });
    for (std::size_t i = 0; i < simulated.size(); ++i) {
      ++stats.simulated;
      if (simulated[i]) keep_answer(std::move(*simulated[i]), options.all_variants, kept);
      if (misses[i]) {
        ++stats.over_memory_in_simulation;
        over_memory.push_back(std::move(*misses[i]));
      }
    }
    // Stable: equal times keep the bound order, which is deterministic.
    std::stable_sort(kept.begin(), kept.end(), [](const RankedPlan& a, const RankedPlan& b) {
      return a.metrics.step_time_s < b.metrics.step_time_s;
    });
    if (kept.size() > options.top_k) kept.resize(options.top_k);
    next = end;
  }
  if (!options.all_variants) {
    for (RankedPlan& row : kept) row.variants = layouts_of_mesh[mesh_sizes(row.plan.mesh)] - 1;
  }
  return kept;
}

// When no plan fits: the nearest candidates (those that overflowed in simulation, then the
// smallest deficits, each mesh once where model states bind) and the constraint that binds.
void explain_no_fit(const SearchContext& context, const std::vector<Knobs>& candidates,
                    std::vector<Deficit> deficits, std::vector<NearMiss> over_memory,
                    SearchResult& result) {
  const schemas::ModelConfig& model = context.model;
  const schemas::ClusterConfig& cluster = context.cluster;
  const SearchOptions& options = context.options;
  const double capacity = context.capacity;
  const SearchStatistics& stats = result.statistics;
  std::sort(deficits.begin(), deficits.end(), [](const Deficit& a, const Deficit& b) {
    return std::tie(a.peak_bytes, a.index) < std::tie(b.peak_bytes, b.index);
  });
  Evaluator evaluator(model, cluster, options, context.orders, capacity);
  for (NearMiss& miss : over_memory) result.nearest.push_back(std::move(miss));
  std::vector<std::tuple<std::int32_t, std::int32_t, std::int32_t, std::int32_t, std::int8_t,
                         std::int32_t, std::int32_t, std::int32_t>>
      shown_states;
  for (const Deficit& deficit : deficits) {
    if (result.nearest.size() >= 5) break;
    const Knobs& knobs = candidates[deficit.index];
    if (deficit.verdict == Verdict::model_states) {
      // Micro-batch, recomputation and schedule do not change model states: show each mesh once.
      const auto key = std::make_tuple(knobs.tp, knobs.cp, knobs.pp, knobs.dp, knobs.zero,
                                       knobs.dp_shard, knobs.ep, knobs.etp);
      if (std::find(shown_states.begin(), shown_states.end(), key) != shown_states.end()) continue;
      shown_states.push_back(key);
    }
    double peak = 0;
    evaluator.build(candidates[deficit.index], &peak);
    schemas::Plan plan = evaluator.plan();
    if (plan.stages.empty()) {
      plan.stages = schemas::even_pipeline_stages(model.num_layers, plan.mesh.pp * plan.mesh.vpp);
    }
    result.nearest.push_back(
        NearMiss{std::move(plan), deficit.peak_bytes, capacity,
                 deficit.verdict == Verdict::model_states ? "model states" : "activations"});
  }
  std::stable_sort(
      result.nearest.begin(), result.nearest.end(),
      [](const NearMiss& a, const NearMiss& b) { return a.peak_bytes < b.peak_bytes; });
  if (result.nearest.size() > 5) result.nearest.resize(5);
  const bool states_bind = stats.pruned_by_activations == 0 && stats.estimated == 0 &&
                           stats.over_memory_in_simulation == 0;
  if (candidates.empty()) {
    result.binding_constraint =
        "no layout satisfies the divisibility rules (heads, ffn, kv heads, sequence, global "
        "batch against the cluster's GPU count)";
  } else {
    // The fewest GPUs of this kind whose memory holds the model states spread evenly over
    // them (ZeRO-3 over all): a floor, since activations and uneven stages need more.
    const costmodels::ParameterBreakdown counts = costmodels::count_parameters(model);
    const costmodels::ModelStateDtypes states = costmodels::model_state_dtypes(
        options.precision, options.gradient_dtype, options.framework);
    const double bytes =
        static_cast<double>(
            costmodels::adam_model_state_bytes(states.states, states.gradients).total()) *
        static_cast<double>(counts.total());
    const double gpus = std::ceil(bytes / capacity);
    const double nodes = std::ceil(gpus / static_cast<double>(cluster.gpus_per_node));
    const std::string floor =
        fmt::format("at least {:.0f} {} GPUs ({:.0f} node{} of {}) would hold them", gpus,
                    cluster.gpu.name, nodes, nodes == 1 ? "" : "s", cluster.gpus_per_node);
    if (states_bind) {
      result.binding_constraint = fmt::format(
          "memory for model states: weights, gradients and Adam state need {:.1f} GiB in all; "
          "the best sharding still leaves the fullest GPU above its {:.1f} GiB; {}",
          bytes / kGiB, capacity / kGiB, floor);
    } else {
      result.binding_constraint = fmt::format(
          "memory for activations: model states fit when sharded ({}), but no layout's "
          "activations fit the {:.1f} GiB per GPU (micro-batch 1 and full recomputation "
          "included)",
          floor, capacity / kGiB);
    }
  }
}

}  // namespace

SearchResult search_plans(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
                          const SearchOptions& given) {
  const auto started = std::chrono::steady_clock::now();
  SearchOptions options = given;
  if (options.seq_length <= 0) options.seq_length = model.max_seq_length;
  if (options.top_k == 0) options.top_k = 1;
  const std::vector<MeshOrder> orders = all_orders();
  const SearchContext context{
      model,
      cluster,
      options,
      orders,
      static_cast<double>(cluster.usable_memory_bytes()) -
          options.memory_reserve_fraction * static_cast<double>(cluster.gpu.memory_bytes),
      std::max(1u, options.threads > 0 ? options.threads : std::thread::hardware_concurrency())};

  SearchResult result;
  SearchStatistics& stats = result.statistics;
  const std::vector<Knobs> candidates =
      enumerate(model, cluster, options, orders, &stats.pruned_by_rules);
  stats.enumerated = static_cast<std::int64_t>(candidates.size()) + stats.pruned_by_rules;
  Scores scores = score_candidates(context, candidates, stats);
  std::vector<NearMiss> over_memory;
  result.best = simulate_best(context, candidates, scores.scored, stats, over_memory);
  result.executor_refusal = std::move(scores.refusal);
  result.executor_refuses_all = result.best.empty() && result.executor_refusal &&
                                stats.estimated == 0 &&
                                stats.pruned_by_model_states + stats.pruned_by_activations == 0;
  if (result.executor_refuses_all) {
    result.binding_constraint = fmt::format(
        "strata's executor does not run these plans ({}: {}); --framework names another stack "
        "to plan for, for simulation only",
        result.executor_refusal->json_path, result.executor_refusal->rule);
  } else if (result.best.empty()) {
    explain_no_fit(context, candidates, std::move(scores.deficits), std::move(over_memory), result);
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace strata::planner
