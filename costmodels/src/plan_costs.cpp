#include "strata/costmodels/plan_costs.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <tuple>

#include "communicator_temporaries.h"
#include "stage_gradient_buckets.h"
#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/framework_behaviour.h"
#include "strata/costmodels/kernel_time.h"
#include "strata/costmodels/model_flops.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::costmodels {
namespace {

using schemas::MeshAxis;

}  // namespace

std::int64_t moe_layers_in(const schemas::ModelConfig& model, std::int64_t first_layer,
                           std::int64_t num_layers) {
  if (!model.moe) return 0;
  return model.moe->num_moe_layers(first_layer + num_layers) -
         model.moe->num_moe_layers(first_layer);
}

RankParameters stage_parameters(const schemas::ModelConfig& model, const ParameterBreakdown& counts,
                                const schemas::Mesh& mesh, const schemas::PipelineStage& stage) {
  const double tp = static_cast<double>(mesh.tp);
  const std::int64_t moe_layers = moe_layers_in(model, stage.first_layer, stage.num_layers);
  const RankParameters dense_layer = rank_layer_parameters(counts, mesh.tp, 1, 1, false);
  RankParameters parameters;
  parameters.dense = dense_layer.dense * static_cast<double>(stage.num_layers - moe_layers);
  if (moe_layers > 0) {
    const RankParameters moe_layer =
        rank_layer_parameters(counts, mesh.tp, mesh.ep, mesh.etp, true);
    parameters.dense += moe_layer.dense * static_cast<double>(moe_layers);
    parameters.expert = moe_layer.expert * static_cast<double>(moe_layers);
  }
  const double vocab_matrix = static_cast<double>(model.vocab_size * model.hidden_size) / tp;
  if (stage.embedding) {
    parameters.dense += vocab_matrix + static_cast<double>(counts.position_embedding) +
                        static_cast<double>(counts.embedding_norm);
  }
  if (stage.lm_head) {
    // A tied head is the embedding itself when one stage holds both, else a copy kept in sync.
    const bool shared_with_embedding = model.tied_embeddings && stage.embedding;
    parameters.dense +=
        (shared_with_embedding ? 0.0 : vocab_matrix) + static_cast<double>(counts.final_norm);
    if (counts.num_mtp_modules > 0) {
      // The MTP modules (Megatron places them all here) and their shared embedding, a copy
      // unless this stage holds the embedding or a tied head's copy counted above.
      if (!stage.embedding) {
        parameters.dense += (model.tied_embeddings ? 0.0 : vocab_matrix) +
                            static_cast<double>(counts.position_embedding + counts.embedding_norm);
      }
      const RankParameters layer =
          rank_layer_parameters(counts, mesh.tp, mesh.ep, mesh.etp, counts.mtp_layer_moe);
      const double hidden = static_cast<double>(model.hidden_size);
      const double modules = static_cast<double>(counts.num_mtp_modules);
      // eh_proj split over tp (Megatron's column-parallel projection); the three norms whole.
      parameters.dense +=
          modules * (layer.dense + 2 * hidden * hidden / tp +
                     static_cast<double>(counts.mtp_module_extra) - 2 * hidden * hidden);
      parameters.expert += modules * layer.expert;
    }
  }
  return parameters;
}

RankStateMemory rank_state_memory(schemas::Dtype states, schemas::Dtype gradients,
                                  std::int64_t zero_stage, double shards, double parameters) {
  const ModelStateBytesPerParameter bytes = adam_model_state_bytes(states, gradients);
  const double w = static_cast<double>(bytes.weights) * parameters;
  const double g = static_cast<double>(bytes.gradients) * parameters;
  const double o = static_cast<double>(bytes.optimizer) * parameters;
  switch (zero_stage) {
    case 0:
      return {w, g, o, 0};
    case 1:
      return {w, g, o / shards, 0};
    case 2:
      return {w, g / shards, o / shards, 0};
    default:
      return {w / shards, g / shards, o / shards, 0};
  }
}

ModelStateDtypes plan_model_state_dtypes(const schemas::Plan& plan) {
  return model_state_dtypes(plan.precision, plan.gradient_dtype, plan.framework);
}

double gradient_bytes_per_parameter(const schemas::Plan& plan) {
  return static_cast<double>(schemas::dtype_bits(plan_model_state_dtypes(plan).gradients) / 8);
}

namespace {

using schemas::CommunicatorOperation;

// One pipeline rank's optimizer step over `parameters` (its stages' `layers`): the passes over
// memory as Megatron and both of Strata's backends run them, per parameter of the optimizer's
// shard — the global norm reads the gradient (g); AdamW, with clipping's factor applied as it
// reads, reads and writes the fp32 master and both moments (4·2·3), reads the gradient (g) and,
// in mixed precision, writes the 16-bit working copy (w; in fp32 the master is the weight); the
// step's start zeroes the gradient buffers the backward accumulates into (the whole stage's below
// ZeRO-2, the shard from ZeRO-1 on) — then ZeRO-1/2's all-gather of the weights (in
// `weight_bytes` each) and the weight casts of quantised GEMMs.
double optimizer_step_time_s(const schemas::Plan& plan, const GroupSpan& shard_span, double shards,
                             double weight_bytes, double parameters, double linear_weights,
                             double layers) {
  const schemas::ClusterConfig& cluster = plan.cluster;
  const ModelStateDtypes states = plan_model_state_dtypes(plan);
  const ModelStateBytesPerParameter bytes = adam_model_state_bytes(states.states, states.gradients);
  const double gradient = static_cast<double>(bytes.gradients);
  // A 16-bit working copy to write after the update (none where the weights are the fp32 master,
  // in fp32 training and under torch.autocast).
  const bool mixed = states.states != schemas::Dtype::fp32 && states.states != schemas::Dtype::tf32;
  const double shard = plan.zero_stage >= 1 ? parameters / shards : parameters;
  const double zeroed =
      (plan.zero_stage < 2 ? parameters : 0.0) + (plan.zero_stage >= 1 ? shard : 0.0);
  const double step_bytes =
      shard * (24.0 + 2 * gradient + (mixed ? static_cast<double>(bytes.weights) : 0.0)) +
      zeroed * gradient;
  double step_s = memory_bound_time_s(cluster.gpu, step_bytes);
  if (plan.zero_stage == 1 || plan.zero_stage == 2) {
    step_s +=
        collective_time_s(cluster, shard_span, Collective::all_gather, parameters * weight_bytes);
  }
  if (schemas::quantises_gemms(plan.precision) && linear_weights > 0) {
    // Transformer Engine casts each layer linear's weight to the GEMMs' format and its transpose
    // once per step (the first micro-batch's forward; later ones reuse it): read 2 bytes, write
    // q + q with the block scales.
    const double cast_transpose = cast_transpose_bytes_per_element(plan.precision);
    step_s += memory_bound_time_s(cluster.gpu, cast_transpose * linear_weights, 4 * layers);
  }
  return step_s;
}

// The layers' linear weights of a stage on one rank (what quantised GEMMs cast each step):
// attention and the MLP split over tp, a MoE layer's shared experts over tp and its routed experts
// over ep·etp.
double stage_linear_weights(const schemas::Plan& plan, const ParameterBreakdown& counts,
                            const schemas::PipelineStage& stage, double expert_parameters) {
  const double tp = static_cast<double>(plan.mesh.tp);
  const double moe_layers =
      static_cast<double>(moe_layers_in(plan.model, stage.first_layer, stage.num_layers));
  const double dense_layers = static_cast<double>(stage.num_layers) - moe_layers;
  return dense_layers * static_cast<double>(counts.attention_per_layer + counts.mlp_per_layer) /
             tp +
         moe_layers *
             static_cast<double>(counts.attention_per_layer + counts.shared_experts_per_moe_layer) /
             tp +
         expert_parameters;
}

// Stage `s`'s passes per micro-batch and the activations they keep: its layers (recomputed or
// not), the embedding and the LM head where it holds them, and Strata's pipeline runtime's
// boundary tensors.
void add_stage_passes(const schemas::Plan& plan, const LayerContext& context,
                      const LayerCostSet& layers, std::size_t s, StageCosts& stage_costs) {
  const schemas::PipelineStage& stage = plan.stages[s];
  const std::size_t num_stages = plan.stages.size();
  const double element = context.activation_bytes();
  std::int64_t recomputed = 0;
  if (plan.recompute.granularity != schemas::RecomputeGranularity::none) {
    recomputed = plan.recompute.full_layers_per_stage.empty()
                     ? stage.num_layers
                     : std::min(stage.num_layers, plan.recompute.full_layers_per_stage[s]);
  }
  // The recomputed layers are the stage's first; MoE layers among either run the MoE costs.
  const double moe_recomputed =
      static_cast<double>(moe_layers_in(plan.model, stage.first_layer, recomputed));
  const double moe_plain = static_cast<double>(
      moe_layers_in(plan.model, stage.first_layer + recomputed, stage.num_layers - recomputed));
  const double plain_layers = static_cast<double>(stage.num_layers - recomputed) - moe_plain;
  const double recomputed_layers = static_cast<double>(recomputed) - moe_recomputed;
  stage_costs.passes += layers.plain.scaled(plain_layers);
  stage_costs.passes += layers.recomputed.scaled(recomputed_layers);
  if (moe_plain + moe_recomputed > 0) {
    stage_costs.passes += layers.moe_plain.scaled(moe_plain);
    stage_costs.passes += layers.moe_recomputed.scaled(moe_recomputed);
  }
  auto add_activations = [&](const LayerActivationBytes& bytes, double count) {
    stage_costs.activations.stored += bytes.stored * count;
    stage_costs.activations.weight_inputs += bytes.weight_inputs * count;
    if (count > 0) {
      stage_costs.activations.working = std::max(stage_costs.activations.working, bytes.working);
    }
  };
  add_activations(layers.plain_activations, plain_layers);
  add_activations(layers.recomputed_activations, recomputed_layers);
  add_activations(layers.moe_plain_activations, moe_plain);
  add_activations(layers.moe_recomputed_activations, moe_recomputed);
  if (stage.embedding) {
    stage_costs.passes += layers.embedding;
    add_activations(layers.embedding_activations, 1);
  }
  if (stage.lm_head) {
    stage_costs.passes += layers.lm_head;
    add_activations(layers.lm_head_activations, 1);
    if (plan.model.mtp) {
      // Each MTP module: its inputs, a layer of the last layer's kind (not recomputed: Megatron
      // recomputes MTP only under uniform recomputation) and another pass through the head.
      // The embedding and the head are gathered once for the stage (ZeRO-3): their passes again
      // carry no gathers of their own.
      const double modules = static_cast<double>(plan.model.mtp->num_modules);
      const bool moe = plan.model.is_moe_layer(plan.model.num_layers);
      const auto without_gathers = [](PassCosts costs) {
        for (PassTime* pass : {&costs.forward, &costs.backward_input, &costs.backward_weight}) {
          pass->dp_comm_s = 0;
        }
        return costs;
      };
      stage_costs.passes += without_gathers(layers.mtp_input).scaled(modules);
      stage_costs.passes += (moe ? layers.moe_plain : layers.plain).scaled(modules);
      stage_costs.passes += without_gathers(layers.lm_head).scaled(modules);
      add_activations(moe ? layers.moe_plain_activations : layers.plain_activations, modules);
      add_activations(layers.lm_head_activations, modules);
    }
  }
  if (context.executor_activation_buffers && num_stages > 1) {
    // Strata's pipeline runtime: each micro-batch in flight keeps, beside its layers' tensors,
    // the stage's output (what SEND_F read) past the last stage's, and the received input and
    // the input's gradient (d_input, sent upstream) past the first; the gradient received for
    // the output is live while the stage's backward runs.
    const double boundary = context.local_tokens() * static_cast<double>(plan.model.hidden_size) *
                            element /
                            (context.sequence_parallel ? static_cast<double>(plan.mesh.tp) : 1.0);
    if (!stage.lm_head) {
      stage_costs.activations.stored += boundary;
      stage_costs.activations.working += boundary;
    }
    if (!stage.embedding) stage_costs.activations.stored += 2 * boundary;
  }
}

// MFU's numerator is Megatron's model-FLOP count (model_flops.h: every GEMM incl. the LM head and
// the full s×s attention products) over every token of the step; recomputation adds what the
// stages really recompute, counted across all ranks doing the same work.
void add_step_flops(const schemas::Plan& plan, PlanCosts& costs) {
  const double tokens_per_step =
      static_cast<double>(plan.batch.global_batch_size * plan.batch.seq_length);
  costs.model_flops_per_step =
      model_flops_per_token(plan.model, plan.batch.seq_length).training() * tokens_per_step;
  const double replicas = static_cast<double>(plan.mesh.tp * plan.mesh.cp * plan.mesh.dp);
  double recompute_flops = 0;
  for (const StageCosts& stage : costs.stages) recompute_flops += stage.passes.recompute_flops;
  costs.hardware_flops_per_step =
      costs.model_flops_per_step +
      recompute_flops * static_cast<double>(plan.batch.num_micro_batches) * replicas;
}

}  // namespace

LayerCostSet layer_cost_set(const LayerContext& context) {
  LayerCostSet set{
      .plain = transformer_layer_costs(context, schemas::RecomputeGranularity::none),
      .recomputed = transformer_layer_costs(context, context.recompute),
      .plain_activations = layer_activation_bytes(context, schemas::RecomputeGranularity::none),
      .recomputed_activations = layer_activation_bytes(context, context.recompute),
      .moe_plain = {},
      .moe_recomputed = {},
      .moe_plain_activations = {},
      .moe_recomputed_activations = {},
      .embedding = embedding_costs(context),
      .lm_head = lm_head_costs(context),
      .embedding_activations = embedding_activation_bytes(context),
      .lm_head_activations = lm_head_activation_bytes(context),
      .mtp_input = {}};
  if (context.model->moe) {
    set.moe_plain =
        transformer_layer_costs(context, schemas::RecomputeGranularity::none, LayerKind::moe);
    set.moe_recomputed = transformer_layer_costs(context, context.recompute, LayerKind::moe);
    set.moe_plain_activations =
        layer_activation_bytes(context, schemas::RecomputeGranularity::none, LayerKind::moe);
    set.moe_recomputed_activations =
        layer_activation_bytes(context, context.recompute, LayerKind::moe);
  }
  if (context.model->mtp) set.mtp_input = mtp_input_costs(context);
  return set;
}

namespace {

// What pricing a plan's stages and ranks reads, fixed per plan: where its groups sit, how many
// ranks sum each gradient and shard ZeRO's state, and the bytes a weight and a gradient take.
struct PlanPricing {
  const schemas::Plan& plan;
  const MeshPlacement& groups;
  const LayerContext& context;
  const LayerCostSet& layers;
  ParameterBreakdown counts;
  FrameworkBehaviour framework;
  // The model states' dtypes, and the bytes a weight is stored, gathered and sent in (the
  // precision's, or fp32 under torch.autocast).
  ModelStateDtypes states;
  double weight_bytes = 0;
  double gradient_bytes = 0;
  double bucket_parameters = 0;
  // Ranks that sum each gradient (dp·cp), and those one copy of ZeRO's state is sharded over
  // (fewer under hybrid sharding, whose reduced shards are then all-reduced over the replicas);
  // a MoE model's routed experts sum over the expert data-parallel group, sharded over its
  // blocks.
  double reducing_ranks = 0, dp_shards = 0, expert_reducing_ranks = 0, expert_shards = 0;
  std::optional<GroupSpan> replica_span{};
  bool all_reduced = false;
  Collective reduction = Collective::reduce_scatter;

  // A bucket's reduction: over the dp·cp group (its shard group and replicas from ZeRO-1 on), or
  // for routed experts over the expert data-parallel group (its shard blocks).
  double bucket_time_s(double bucket, bool experts) const {
    const GroupSpan& span = all_reduced ? (experts ? groups.edp : groups.reduction)
                                        : (experts ? groups.expert_zero_shard : groups.zero_shard);
    double bucket_s = collective_time_s(plan.cluster, span, reduction, bucket * gradient_bytes);
    if (!all_reduced && replica_span) {
      bucket_s +=
          collective_time_s(plan.cluster, *replica_span, Collective::all_reduce,
                            bucket / (experts ? expert_shards : dp_shards) * gradient_bytes);
    }
    return bucket_s;
  }
};

PlanPricing plan_pricing(const schemas::Plan& plan, const MeshPlacement& groups,
                         const LayerContext& context, const LayerCostSet& layers) {
  PlanPricing pricing{.plan = plan,
                      .groups = groups,
                      .context = context,
                      .layers = layers,
                      .counts = count_parameters(plan.model),
                      .framework = framework_behaviour(plan.framework),
                      .states = plan_model_state_dtypes(plan)};
  pricing.weight_bytes = static_cast<double>(
      adam_model_state_bytes(pricing.states.states, pricing.states.gradients).weights);
  pricing.gradient_bytes = gradient_bytes_per_parameter(plan);
  pricing.bucket_parameters = static_cast<double>(layout::gradient_bucket_elements(plan));
  pricing.reducing_ranks = static_cast<double>(plan.mesh.dp * plan.mesh.cp);
  pricing.dp_shards = static_cast<double>(plan.mesh.zero_shard_dp() * plan.mesh.cp);
  pricing.expert_reducing_ranks = static_cast<double>(plan.mesh.expert_dp());
  pricing.expert_shards = static_cast<double>(plan.mesh.expert_zero_shards());
  if (plan.mesh.zero_replicas() > 1) pricing.replica_span = groups.zero_replica;
  pricing.all_reduced =
      plan.zero_stage == 0 || (plan.zero_stage == 1 && plan.precision == schemas::Dtype::bf16 &&
                               pricing.framework.zero1_bf16_gradients_all_reduced);
  // Every framework issues a bucket's all-reduce non-blocking (it overlaps the backward, or the
  // buckets go out together); a tier that timed that form prices it by its own curve.
  pricing.reduction =
      pricing.all_reduced ? Collective::all_reduce_non_blocking : Collective::reduce_scatter;
  return pricing;
}

// What each pipeline rank holds over its stages.
struct RankHoldings {
  double dense_parameters = 0;
  double expert_parameters = 0;
  double linear_weights = 0;  // quantised GEMMs only: what the step casts
  double layers = 0;
};

// A stage's gradient buckets and what their collectives hold on its pipeline rank.
void price_stage_buckets(const PlanPricing& pricing, const schemas::PipelineStage& stage,
                         const RankParameters& held, std::size_t rank_of_stage,
                         StageBucketTimes& bucket_times, CommunicatorTemporaries& temporaries,
                         StageCosts& stage_costs) {
  const schemas::Plan& plan = pricing.plan;
  const StageBucketTimes::Times& times = bucket_times.of(
      plan, stage, held, !pricing.framework.gradient_buckets_close_at_units,
      pricing.bucket_parameters,
      [&](double elements, bool experts) { return pricing.bucket_time_s(elements, experts); });
  stage_costs.gradient_buckets_s = times.times_s;
  if (pricing.all_reduced) {
    // Every bucket's non-blocking all-reduce is waited for only before the step.
    temporaries.hold_until_step(rank_of_stage, CommunicatorOperation::all_reduce_non_blocking,
                                stage_costs.parameters * pricing.gradient_bytes);
  } else {
    temporaries.while_running(rank_of_stage, CommunicatorOperation::reduce_scatter,
                              times.largest * pricing.gradient_bytes);
  }
  if (plan.zero_stage == 1 || plan.zero_stage == 2) {
    // The updated weights gathered back after the step, bucket by bucket.
    temporaries.while_running(rank_of_stage, CommunicatorOperation::all_gather,
                              times.largest * pricing.weight_bytes);
  }
}

// ZeRO-3's gathers of a stage's weights: what they hold and, gathered at once, how long they
// take.
void price_stage_unshard(const PlanPricing& pricing, const schemas::PipelineStage& stage,
                         const RankParameters& held, std::size_t rank_of_stage,
                         CommunicatorTemporaries& temporaries, StageCosts& stage_costs) {
  const schemas::Plan& plan = pricing.plan;
  const ParameterBreakdown& counts = pricing.counts;
  if (pricing.context.zero3_layer_gathers) {
    // Gathered and reduce-scattered layer by layer inside the passes (transformer_layer_costs.cpp):
    // what is held is the layer running and the one prefetched, or the embedding or head if
    // larger.
    const double largest = std::max(
        {largest_layer_parameters_on_rank(counts, plan.mesh.tp, plan.mesh.ep, plan.mesh.etp),
         stage.embedding
             ? static_cast<double>(counts.token_embedding) / static_cast<double>(plan.mesh.tp)
             : 0.0,
         stage.lm_head ? static_cast<double>(counts.lm_head) / static_cast<double>(plan.mesh.tp)
                       : 0.0});
    stage_costs.unshard_bytes = 2 * largest * pricing.weight_bytes;
  } else if (plan.zero_stage == 3) {
    stage_costs.unshard_bytes = stage_costs.parameters * pricing.weight_bytes;
    stage_costs.unshard_s =
        collective_time_s(plan.cluster, pricing.groups.zero_shard, Collective::all_gather,
                          held.dense * pricing.weight_bytes) +
        collective_time_s(plan.cluster, pricing.groups.expert_zero_shard, Collective::all_gather,
                          held.expert * pricing.weight_bytes);
  }
  if (stage_costs.unshard_bytes > 0) {
    // The stage's weights at once, or layer by layer (half of what is held).
    const double gathered = pricing.context.zero3_layer_gathers ? stage_costs.unshard_bytes / 2
                                                                : stage_costs.unshard_bytes;
    temporaries.while_running(rank_of_stage, CommunicatorOperation::all_gather, gathered);
  }
}

// Each pipeline rank's model states and optimizer step over what it holds.
void price_rank_states(const PlanPricing& pricing, const std::vector<RankHoldings>& holdings,
                       PlanCosts& costs) {
  const schemas::Plan& plan = pricing.plan;
  const ModelStateDtypes& states = pricing.states;
  for (std::size_t rank = 0; rank < holdings.size(); ++rank) {
    const RankHoldings& held = holdings[rank];
    RankStateMemory state = rank_state_memory(states.states, states.gradients, plan.zero_stage,
                                              pricing.dp_shards, held.dense_parameters);
    costs.optimizer_step_s[rank] = optimizer_step_time_s(
        plan, pricing.groups.zero_shard, pricing.dp_shards, pricing.weight_bytes,
        held.dense_parameters, held.linear_weights, held.layers);
    if (held.expert_parameters > 0) {
      const RankStateMemory experts =
          rank_state_memory(states.states, states.gradients, plan.zero_stage, pricing.expert_shards,
                            held.expert_parameters);
      state.weights_bytes += experts.weights_bytes;
      state.gradients_bytes += experts.gradients_bytes;
      state.optimizer_bytes += experts.optimizer_bytes;
      costs.optimizer_step_s[rank] +=
          optimizer_step_time_s(plan, pricing.groups.expert_zero_shard, pricing.expert_shards,
                                pricing.weight_bytes, held.expert_parameters, 0, 0);
    }
    costs.rank_states[rank] = state;
  }
}

// The communicator's temporaries of the collectives every micro-batch runs on every rank: the
// pipeline's sends of `boundary_bytes` and tp's collectives over the micro-batch's activations.
void hold_pass_temporaries(const PlanPricing& pricing, double boundary_bytes,
                           CommunicatorTemporaries& temporaries) {
  const schemas::Plan& plan = pricing.plan;
  if (plan.mesh.pp > 1) {
    temporaries.while_running_on_every_rank(CommunicatorOperation::send_receive, boundary_bytes);
  }
  if (plan.mesh.tp > 1) {
    // Each layer's activation all-reduce (or, with sequence parallelism, its reduce-scatter and
    // all-gather) over the micro-batch's tokens.
    const double activation = pricing.context.local_tokens() *
                              static_cast<double>(plan.model.hidden_size) *
                              pricing.context.activation_bytes();
    if (pricing.context.sequence_parallel) {
      temporaries.while_running_on_every_rank(CommunicatorOperation::reduce_scatter, activation);
      temporaries.while_running_on_every_rank(CommunicatorOperation::all_gather, activation);
    } else {
      temporaries.while_running_on_every_rank(CommunicatorOperation::all_reduce, activation);
    }
  }
}

// The first and last pipeline ranks sum the tied word embedding's gradient (a blocking
// all-reduce, after every backward of the step).
void price_tied_embedding(const PlanPricing& pricing, CommunicatorTemporaries& temporaries,
                          PlanCosts& costs) {
  const schemas::Plan& plan = pricing.plan;
  const double bytes = static_cast<double>(plan.model.vocab_size * plan.model.hidden_size) /
                       static_cast<double>(plan.mesh.tp) * pricing.gradient_bytes;
  costs.tied_embedding_grad_s =
      collective_time_s(plan.cluster, pricing.groups.embedding_pair, Collective::all_reduce, bytes);
  for (const std::size_t rank : {std::size_t{0}, static_cast<std::size_t>(plan.mesh.pp - 1)}) {
    temporaries.while_running(rank, CommunicatorOperation::all_reduce, bytes);
  }
}

}  // namespace

PlanCosts plan_costs(const schemas::Plan& plan, const LayerCostSet* given_layers, CostDetail detail,
                     const MeshPlacement* placement) {
  const bool full = detail == CostDetail::full;
  const MeshPlacement own_placement =
      placement ? MeshPlacement{} : mesh_placement(plan.cluster, plan.mesh, plan.model);
  const MeshPlacement& groups = placement ? *placement : own_placement;
  const LayerContext context = layer_context(plan, &groups);
  // Per-layer costs are the same for every layer: computed once (or handed in by a caller that
  // caches them across plans).
  const LayerCostSet computed = given_layers ? LayerCostSet{} : layer_cost_set(context);
  const LayerCostSet& layers = given_layers ? *given_layers : computed;
  const PlanPricing pricing = plan_pricing(plan, groups, context, layers);
  const std::int64_t pp = plan.mesh.pp;

  PlanCosts costs;
  costs.capacity_bytes = static_cast<double>(plan.cluster.usable_memory_bytes());
  costs.dp_overlap_slowdown = plan.cluster.gpu.compute_slowdown_under_communication;

  // Activations cross a stage boundary split across tp (Megatron scatters them before the send
  // and gathers after, or they are already split under sequence parallelism) — unless the stack
  // sends the tensor each tp rank holds, which without sequence parallelism is all of it.
  const bool split_send =
      !pricing.framework.pipeline_sends_whole_activations || context.sequence_parallel;
  const double boundary_bytes =
      context.local_tokens() * static_cast<double>(plan.model.hidden_size) *
      context.activation_bytes() / (split_send ? static_cast<double>(plan.mesh.tp) : 1.0);
  const double send_s =
      pp > 1 ? point_to_point_time_s(plan.cluster, groups.pp_tier, boundary_bytes) : 0;
  CommunicatorTemporaries temporaries(plan.cluster, pp);
  hold_pass_temporaries(pricing, boundary_bytes, temporaries);

  const std::size_t num_stages = plan.stages.size();
  costs.stages.resize(num_stages);
  costs.rank_states.assign(static_cast<std::size_t>(pp), {});
  costs.optimizer_step_s.assign(static_cast<std::size_t>(pp), 0.0);
  StageBucketTimes bucket_times;
  // What each pipeline rank holds over its stages (one allocation: this runs per candidate).
  std::vector<RankHoldings> rank_holdings(static_cast<std::size_t>(pp));
  for (std::size_t s = 0; s < num_stages; ++s) {
    const schemas::PipelineStage& stage = plan.stages[s];
    StageCosts& stage_costs = costs.stages[s];
    add_stage_passes(plan, context, layers, s, stage_costs);
    const RankParameters held = stage_parameters(plan.model, pricing.counts, plan.mesh, stage);
    stage_costs.parameters = held.total();
    stage_costs.expert_parameters = held.expert;
    if (s + 1 < num_stages) stage_costs.send_forward_s = send_s;
    if (s > 0) stage_costs.send_backward_s = send_s;

    const std::size_t rank_of_stage = s % static_cast<std::size_t>(pp);
    const bool reduced =
        pricing.reducing_ranks > 1 || (held.expert > 0 && pricing.expert_reducing_ranks > 1);
    if (full && reduced && !context.zero3_layer_gathers) {
      price_stage_buckets(pricing, stage, held, rank_of_stage, bucket_times, temporaries,
                          stage_costs);
    }
    if (full) price_stage_unshard(pricing, stage, held, rank_of_stage, temporaries, stage_costs);
    RankHoldings& holdings = rank_holdings[rank_of_stage];
    holdings.dense_parameters += held.dense;
    holdings.expert_parameters += held.expert;
    if (schemas::quantises_gemms(plan.precision)) {
      holdings.linear_weights += stage_linear_weights(plan, pricing.counts, stage, held.expert);
    }
    holdings.layers += static_cast<double>(stage.num_layers);
  }
  price_rank_states(pricing, rank_holdings, costs);
  if (plan.model.last_stage_uses_word_embedding() && pp > 1)
    price_tied_embedding(pricing, temporaries, costs);
  for (std::size_t rank = 0; rank < static_cast<std::size_t>(pp); ++rank) {
    costs.rank_states[rank].communicator_bytes = temporaries.on_rank(rank);
  }

  if (full) add_step_flops(plan, costs);
  return costs;
}

}  // namespace strata::costmodels
