#include "candidate_evaluator.h"

#include <algorithm>
#include <cmath>

#include "strata/schedule/micro_batches_in_flight.h"
#include "strata/schemas/plan_rules.h"

namespace strata::planner::search {

using schemas::RecomputeGranularity;
using schemas::ScheduleType;

Evaluator::Evaluator(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
                     const SearchOptions& options, const std::vector<MeshOrder>& orders,
                     double capacity)
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

Verdict Evaluator::build(const Knobs& knobs, double* peak_bytes) {
  schemas::Plan& plan = plan_;
  plan.mesh = {knobs.tp,       knobs.cp, knobs.dp, knobs.pp, knobs.vpp, orders_[knobs.order],
               knobs.dp_shard, knobs.ep, knobs.etp};
  plan.batch.micro_batch_size = knobs.micro_batch;
  plan.batch.num_micro_batches = plan.batch.global_batch_size / (knobs.micro_batch * knobs.dp);
  plan.sequence_parallel = knobs.sequence_parallel;
  plan.zero_stage = knobs.zero;
  plan.recompute = {knobs.recompute, {}, {}};
  plan.schedule = {knobs.schedule, {}};
  // The expert all-to-alls run beside another micro-batch's compute where the plan rules allow it
  // (Megatron-Core's combined 1F1B). The planner asks for it only in a pipeline (the rules then
  // ask for interleaving, whose steady state already holds the paired micro-batches): without
  // pipelining the pairing keeps a second micro-batch's activations alive, which the memory model
  // does not count.
  plan.ep_comm_overlap = plan.model.moe && knobs.pp > 1 && !schemas::ep_comm_overlap_refusal(plan);
  // Hybrid shards and an expert mesh are enumerated apart; together they must still hold.
  if (schemas::dp_shard_refusal(plan.mesh, plan.zero_stage)) return Verdict::rules;
  // What the planner emits for the strata framework is what its executor runs: one rule.
  if (plan.framework == schemas::TrainingFramework::strata) {
    if (std::optional<schemas::ExecutorRefusal> refusal = schemas::executor_refusal(plan)) {
      refusal_ = std::move(refusal);
      return Verdict::executor;
    }
  }

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

  const StateBytes states = state_bytes(knobs, context);
  // Model states alone, evenly spread, already too much: nothing below can fit.
  if (states.total / static_cast<double>(knobs.pp) > capacity_) {
    *peak_bytes = states.total / static_cast<double>(knobs.pp);
    return Verdict::model_states;
  }
  plan.stages.clear();
  return knobs.vpp == 1 ? split_layers(knobs, states, layer, activations, costs, peak_bytes)
                        : split_interleaved(knobs, states, activations, peak_bytes);
}

Evaluator::StateBytes Evaluator::state_bytes(const Knobs& knobs,
                                             const costmodels::LayerContext& context) const {
  const schemas::Plan& plan = plan_;
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
  const double dense_bytes =
      costmodels::rank_state_memory(states_.states, states_.gradients, knobs.zero,
                                    static_cast<double>(plan.mesh.zero_shard_dp() * knobs.cp), 1.0)
          .total() +
      gathered;
  const double expert_bytes =
      costmodels::rank_state_memory(states_.states, states_.gradients, knobs.zero,
                                    static_cast<double>(plan.mesh.expert_zero_shards()), 1.0)
          .total() +
      gathered;
  const auto state_of = [&](std::int64_t first_layer, std::int64_t layers_held, bool embedding,
                            bool head) {
    const costmodels::RankParameters held = costmodels::stage_parameters(
        plan.model, counts_, plan.mesh, {first_layer, layers_held, embedding, head});
    return held.dense * dense_bytes + held.expert * expert_bytes;
  };
  StateBytes bytes;
  bytes.layer = state_of(representative_layer_, 1, false, false);
  bytes.embedding = state_of(0, 0, true, false);
  bytes.head = knobs.pp * knobs.vpp == 1 ? state_of(0, 0, true, true) - bytes.embedding
                                         : state_of(0, 0, false, true);
  bytes.total = state_of(0, plan.model.num_layers, true, true);
  return bytes;
}

Verdict Evaluator::split_layers(const Knobs& knobs, const StateBytes& states,
                                const costmodels::PassCosts& layer,
                                const costmodels::LayerActivationBytes& activations,
                                const costmodels::LayerCostSet& costs, double* peak_bytes) {
  schemas::Plan& plan = plan_;
  const std::int64_t pp = knobs.pp;
  const std::int64_t m = plan.batch.num_micro_batches;
  const std::int64_t layers = plan.model.num_layers;
  std::vector<StageShape> shapes(static_cast<std::size_t>(pp));
  for (std::int64_t s = 0; s < pp; ++s) {
    StageShape& shape = shapes[static_cast<std::size_t>(s)];
    const double held =
        static_cast<double>(schedule::peak_micro_batches_in_flight(knobs.schedule, pp, 1, m, s));
    shape.memory_per_layer_bytes = states.layer + held * activations.stored;
    shape.min_layers = (s == 0 || s == pp - 1) ? 0 : 1;
    if (s == 0) {
      shape.fixed_s += costs.embedding.forward_backward_s();
      shape.memory_fixed_bytes += states.embedding;
    }
    if (s == pp - 1) {
      shape.fixed_s += costs.lm_head.forward_backward_s();
      shape.memory_fixed_bytes += states.head;
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
      !fewest_recomputed_layers(knobs, shapes, states.layer, m)) {
    return Verdict::duplicate;  // recomputing nothing is the candidate without recompute
  }
  return Verdict::ok;
}

Verdict Evaluator::split_interleaved(const Knobs& knobs, const StateBytes& states,
                                     const costmodels::LayerActivationBytes& activations,
                                     double* peak_bytes) {
  schemas::Plan& plan = plan_;
  const std::int64_t pp = knobs.pp;
  const std::int64_t vpp = knobs.vpp;
  const std::int64_t m = plan.batch.num_micro_batches;
  const std::int64_t layers = plan.model.num_layers;
  if (layers % (pp * vpp) != 0) return Verdict::rules;
  plan.stages = schemas::even_pipeline_stages(layers, pp * vpp);
  const double chunk_layers = static_cast<double>(layers / (pp * vpp));
  double worst = 0;
  for (std::int64_t r = 0; r < pp; ++r) {
    double bytes =
        chunk_layers * static_cast<double>(vpp) * states.layer +
        static_cast<double>(schedule::peak_micro_batches_in_flight(knobs.schedule, pp, vpp, m, r)) *
            chunk_layers * activations.stored;
    if (r == 0) bytes += states.embedding;
    if (r == pp - 1) bytes += states.head;
    worst = std::max(worst, bytes);
  }
  if (worst > capacity_) {
    *peak_bytes = worst;
    return Verdict::activations;
  }
  return Verdict::ok;
}

double Evaluator::lower_bound(const costmodels::PlanCosts& costs) const {
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

void Evaluator::choose_cp_comm(costmodels::LayerContext& context) {
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

const costmodels::LayerCostSet& Evaluator::layer_costs(const costmodels::LayerContext& context) {
  // Most contexts are their own keys: look those up without copying them.
  const bool own_key = costmodels::is_layer_cost_key(context);
  auto found = own_key ? cache_.find(context) : cache_.find(costmodels::layer_cost_key(context));
  if (found == cache_.end()) {
    found = cache_.emplace(costmodels::layer_cost_key(context), costmodels::layer_cost_set(context))
                .first;
  }
  current_ = &found->second;
  return found->second;
}

void Evaluator::use_even_split() {
  plan_.stages =
      schemas::even_pipeline_stages(plan_.model.num_layers, plan_.mesh.pp * plan_.mesh.vpp);
  plan_.recompute.full_layers_per_stage.clear();
}

bool Evaluator::fewest_recomputed_layers(const Knobs& knobs, const std::vector<StageShape>& shapes,
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

const costmodels::MeshPlacement& Evaluator::placement_of(const Knobs& knobs) {
  const auto key = std::make_tuple(knobs.tp, knobs.cp, knobs.dp, knobs.pp, knobs.order,
                                   knobs.dp_shard, knobs.ep, knobs.etp);
  auto found = placements_.find(key);
  if (found == placements_.end()) {
    found =
        placements_.emplace(key, costmodels::mesh_placement(plan_.cluster, plan_.mesh, plan_.model))
            .first;
  }
  return found->second;
}

}  // namespace strata::planner::search
