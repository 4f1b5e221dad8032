#include "strata/costmodels/layer_costs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <vector>

#include "layer_pass_parts.h"
#include "strata/costmodels/attention_time.h"
#include "strata/costmodels/framework_behaviour.h"
#include "strata/costmodels/gemm_passes.h"
#include "strata/costmodels/kernel_time.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/moe_block_costs.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/costmodels/unfused_elementwise.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::costmodels {
namespace detail {
namespace {

// ZeRO-3's collectives of `parameters` over `span`, the shard group of `shards` ranks.
Zero3Collectives zero3_collectives_over(const LayerContext& context, const GroupSpan& span,
                                        double shards, double parameters) {
  const double gradient_bytes = static_cast<double>(
      adam_model_state_bytes(context.precision, context.gradient_dtype_of()).gradients);
  Zero3Collectives collectives{
      .gather_s = collective_time_s(*context.cluster, span, Collective::all_gather,
                                    parameters * context.activation_bytes()),
      .scatter_s = collective_time_s(*context.cluster, span, Collective::reduce_scatter,
                                     parameters * gradient_bytes)};
  if (context.replica_span) {
    // Hybrid sharding: each reduced shard is then summed over its replicas.
    collectives.scatter_s +=
        collective_time_s(*context.cluster, *context.replica_span, Collective::all_reduce,
                          parameters / shards * gradient_bytes);
  }
  return collectives;
}

}  // namespace

Zero3Collectives zero3_collectives(const LayerContext& context, double parameters) {
  return zero3_collectives_over(context, context.dp_span, context.zero_shards, parameters);
}

Zero3Collectives zero3_collectives(const LayerContext& context, LayerKind kind) {
  const RankParameters parameters =
      rank_layer_parameters(count_parameters(*context.model), context.tp, context.ep, context.etp,
                            kind == LayerKind::moe);
  Zero3Collectives collectives = zero3_collectives(context, parameters.dense);
  if (parameters.expert > 0) {
    const Zero3Collectives experts = zero3_collectives_over(
        context, context.expert_zero_span, context.expert_zero_shards, parameters.expert);
    collectives.gather_s += experts.gather_s;
    collectives.scatter_s += experts.scatter_s;
  }
  return collectives;
}

double beside_compute_s(const LayerContext& context, double comm_s, double compute_s) {
  const double slowdown = context.cluster->gpu.compute_slowdown_under_communication;
  return std::max(0.0, comm_s - compute_s) + slowdown * std::min(comm_s, compute_s);
}

void charge_host_issue(const LayerContext& context, PassCosts& costs) {
  const bool whole_step = context.graphed(schemas::CudaGraphScope::full_iteration);
  for (PassTime* pass :
       {&costs.forward, &costs.backward_input, &costs.backward_weight, &costs.recompute}) {
    const double issued = pass->kernels - pass->graphed_kernels + pass->graphs;
    pass->host_issue_s = whole_step ? 0.0 : issued * context.eager_issue_s_per_kernel;
  }
}

}  // namespace detail

namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }

using detail::beside_compute_s;
using detail::charge_host_issue;
using detail::zero3_collectives;
using detail::Zero3Collectives;
using schemas::Dtype;
using schemas::RecomputeGranularity;

}  // namespace

PassTime& PassTime::operator+=(const PassTime& other) {
  compute_s += other.compute_s;
  tp_comm_s += other.tp_comm_s;
  cp_comm_s += other.cp_comm_s;
  dp_comm_s += other.dp_comm_s;
  ep_comm_s += other.ep_comm_s;
  kernels += other.kernels;
  graphed_kernels += other.graphed_kernels;
  graphs += other.graphs;
  host_issue_s += other.host_issue_s;
  return *this;
}

PassTime PassTime::scaled(double factor) const {
  return {compute_s * factor,       tp_comm_s * factor, cp_comm_s * factor,
          dp_comm_s * factor,       ep_comm_s * factor, kernels * factor,
          graphed_kernels * factor, graphs * factor,    host_issue_s * factor};
}

PassCosts& PassCosts::operator+=(const PassCosts& other) {
  forward += other.forward;
  backward_input += other.backward_input;
  backward_weight += other.backward_weight;
  recompute += other.recompute;
  forward_flops += other.forward_flops;
  recompute_flops += other.recompute_flops;
  return *this;
}

PassCosts PassCosts::scaled(double factor) const {
  return {forward.scaled(factor),   backward_input.scaled(factor), backward_weight.scaled(factor),
          recompute.scaled(factor), forward_flops * factor,        recompute_flops * factor};
}

double LayerContext::local_tokens() const {
  return static_cast<double>(micro_batch_size) * static_cast<double>(seq_length) /
         static_cast<double>(cp);
}

double LayerContext::norm_tokens() const {
  return sequence_parallel ? local_tokens() / static_cast<double>(tp) : local_tokens();
}

double LayerContext::activation_bytes() const {
  return precision == Dtype::fp32 || precision == Dtype::tf32 ? 4.0 : 2.0;
}

LocalLayerDims local_layer_dims(const LayerContext& context, LayerKind kind) {
  const schemas::ModelConfig& model = *context.model;
  const double t = static_cast<double>(context.tp);
  double ffn = static_cast<double>(model.ffn_hidden_size);
  if (kind == LayerKind::moe) {
    ffn = static_cast<double>(model.moe->num_shared_experts *
                              model.moe->shared_expert_ffn_hidden_size);
  }
  LocalLayerDims dims{.hidden = static_cast<double>(model.hidden_size),
                      .head_dim = static_cast<double>(model.head_dim),
                      .heads = static_cast<double>(model.num_attention_heads) / t,
                      .kv_heads = ceil_div(static_cast<double>(model.num_kv_heads), t),
                      .ffn = ffn / t,
                      .gate = schemas::is_gated(model.mlp_activation) ? 2.0 : 1.0,
                      .value_dim = static_cast<double>(model.head_dim),
                      .latent = 0};
  if (model.mla) {
    dims.value_dim = static_cast<double>(model.mla->v_head_dim);
    dims.latent = static_cast<double>(model.mla->q_lora_rank + model.mla->kv_lora_rank +
                                      model.mla->qk_rope_head_dim);
  }
  return dims;
}

LayerContext layer_cost_key(LayerContext context) {
  if (context.cp_comm == schemas::ContextParallelComm::ring) context.cp_span = {};
  return context;
}

bool is_layer_cost_key(const LayerContext& context) {
  return context.cp_comm != schemas::ContextParallelComm::ring || context.cp_span == GroupSpan{};
}

std::size_t LayerCostKeyHash::operator()(const LayerContext& key) const {
  std::size_t hash = 0;
  const auto mix = [&hash](std::int64_t value) {
    // boost::hash_combine's mixing step.
    hash ^= std::hash<std::int64_t>{}(value) + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
  };
  mix(key.tp);
  mix(key.cp);
  mix(key.ep);
  mix(key.etp);
  mix(key.micro_batch_size);
  mix(static_cast<std::int64_t>(key.recompute));
  mix(static_cast<std::int64_t>(key.cp_comm));
  mix(key.sequence_parallel + 2 * key.zero3_layer_gathers + 4 * key.ep_comm_overlap);
  mix(key.cp_tier);
  for (const GroupSpan* span : {&key.tp_span, &key.cp_span, &key.dp_span, &key.ep_span,
                                &key.etp_span, &key.expert_zero_span}) {
    mix(span->size);
    mix(span->outermost_tier());
  }
  return hash;
}

LayerContext layer_context(const schemas::Plan& plan, const MeshPlacement* placement) {
  const MeshPlacement computed =
      placement ? MeshPlacement{} : mesh_placement(plan.cluster, plan.mesh, plan.model);
  const MeshPlacement& groups = placement ? *placement : computed;
  const FrameworkBehaviour behaviour = framework_behaviour(plan.framework);
  LayerContext context{.model = &plan.model,
                       .cluster = &plan.cluster,
                       .precision = plan.precision,
                       .gradient_dtype = plan.gradient_dtype,
                       .tp = plan.mesh.tp,
                       .cp = plan.mesh.cp,
                       .sequence_parallel = plan.sequence_parallel && plan.mesh.tp > 1,
                       .micro_batch_size = plan.batch.micro_batch_size,
                       .seq_length = plan.batch.seq_length,
                       .recompute = plan.recompute.granularity,
                       .tp_comm_overlap = plan.tp_comm_overlap,
                       .attention = plan.attention,
                       .zero3_layer_gathers = plan.zero_stage == 3 && plan.mesh.pp == 1 &&
                                              plan.mesh.dp * plan.mesh.cp > 1 &&
                                              behaviour.zero3_gathers_per_layer,
                       .executor_activation_buffers = behaviour.executor_activation_buffers,
                       .loss_gradient_in_logits = behaviour.loss_gradient_in_logits,
                       .autocast_over_fp32_parameters = behaviour.autocast_over_fp32_parameters,
                       .bias_gradients_in_own_kernels = behaviour.bias_gradients_in_own_kernels,
                       .unfused_elementwise = behaviour.unfused_elementwise,
                       .dp_span = {},
                       .replica_span = std::nullopt,
                       .zero_shards = 1,
                       .expert_zero_span = {},
                       .expert_zero_shards = 1,
                       .tp_span = groups.tp,
                       .cp_comm = plan.cp_comm,
                       .cp_tier = 0,
                       .cp_span = {},
                       .ep = 1,
                       .etp = 1,
                       .ep_span = {},
                       .etp_span = {},
                       .expert_load_imbalance = 1.0,
                       .ep_comm_overlap = false};
  if (plan.mesh.cp > 1) {
    context.cp_tier = groups.cp_tier;
    context.cp_span = groups.cp;
  }
  if (plan.model.moe) {
    context.ep = plan.mesh.ep;
    context.etp = plan.mesh.etp;
    context.ep_span = groups.ep;
    context.etp_span = groups.etp;
    context.expert_load_imbalance =
        plan.expert_load_imbalance.value_or(kDefaultExpertLoadImbalance);
    context.ep_comm_overlap = plan.ep_comm_overlap;
    if (context.zero3_layer_gathers) {
      context.expert_zero_span = groups.expert_zero_shard;
      context.expert_zero_shards = static_cast<double>(plan.mesh.expert_zero_shards());
    }
  }
  // Only per-layer ZeRO-3 reads it; the planner builds a context for every candidate.
  if (context.zero3_layer_gathers) {
    context.dp_span = groups.zero_shard;
    context.zero_shards = static_cast<double>(plan.mesh.zero_shard_dp() * plan.mesh.cp);
    if (plan.mesh.zero_replicas() > 1) context.replica_span = groups.zero_replica;
  }
  for (schemas::CudaGraphScope scope : plan.cuda_graph_scope) {
    context.cuda_graph_scopes |= 1u << static_cast<unsigned>(scope);
  }
  // What a layer costed as selectively recomputed recomputes (whatever the plan's granularity:
  // the costs' caller chooses each layer's).
  if (!plan.recompute.modules.empty()) {
    context.recompute_modules = 0;
    for (schemas::RecomputeModule module : plan.recompute.modules) {
      context.recompute_modules |= 1u << static_cast<unsigned>(module);
    }
  }
  if (behaviour.issues_kernels_eagerly && plan.cluster.gpu.eager_issue_us_per_kernel) {
    context.eager_issue_s_per_kernel = *plan.cluster.gpu.eager_issue_us_per_kernel * 1e-6;
  }
  return context;
}

PassCosts embedding_costs(const LayerContext& context) {
  const schemas::ModelConfig& model = *context.model;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const double hidden = static_cast<double>(model.hidden_size);
  const double tokens = context.local_tokens();
  const double element = context.activation_bytes();
  const bool learned = model.position_embedding == schemas::PositionEmbedding::learned;
  // Gather the rows (and position rows), write the sum; backward scatter-adds into fp32 grads.
  const double forward_bytes = tokens * hidden * element * (learned ? 3 : 2);
  const double backward_bytes = tokens * hidden * (element + 8) * (learned ? 2 : 1);
  // The embedding's dropout: a keep decision per element each way, as in the layers.
  const double dropout_s =
      model.dropout > 0 ? random_number_time_s(gpu, context.norm_tokens() * hidden) : 0.0;
  PassCosts costs;
  costs.forward.compute_s = memory_bound_time_s(gpu, forward_bytes) + dropout_s;
  costs.backward_weight.compute_s = memory_bound_time_s(gpu, backward_bytes) + dropout_s;
  // The lookups (and the positions' lookup and sum) forward; their scatter-adds backward.
  costs.forward.kernels = learned ? 3 : 1;
  costs.backward_weight.kernels = learned ? 2 : 1;
  if (context.tp > 1) {
    costs.forward.kernels += 1;
    costs.backward_input.kernels += context.sequence_parallel ? 1 : 0;
    // The vocab-parallel lookup ends in an all-reduce (a reduce-scatter under sequence
    // parallelism); its backward is free or an all-gather.
    const double bytes = tokens * hidden * element;
    const Collective forward_collective =
        context.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce;
    costs.forward.tp_comm_s =
        collective_time_s(*context.cluster, context.tp_span, forward_collective, bytes);
    if (context.sequence_parallel) {
      costs.backward_input.tp_comm_s =
          collective_time_s(*context.cluster, context.tp_span, Collective::all_gather, bytes);
    }
  }
  if (context.zero3_layer_gathers) {
    // Nothing runs before the embedding and the first layer are gathered; the embedding's
    // gradient is reduce-scattered after the backward has passed it.
    const ParameterBreakdown counts = count_parameters(model);
    const double embedding_parameters =
        static_cast<double>(counts.token_embedding) / static_cast<double>(context.tp) +
        static_cast<double>(counts.position_embedding + counts.embedding_norm);
    const Zero3Collectives embedding = zero3_collectives(context, embedding_parameters);
    costs.forward.dp_comm_s =
        embedding.gather_s +
        zero3_collectives(
            context, largest_layer_parameters_on_rank(counts, context.tp, context.ep, context.etp))
            .gather_s;
    costs.backward_weight.dp_comm_s = embedding.scatter_s;
    costs.forward.kernels += 2;
    costs.backward_weight.kernels += 1;
  }
  charge_host_issue(context, costs);
  return costs;
}

PassCosts mtp_input_costs(const LayerContext& context) {
  const schemas::ModelConfig& model = *context.model;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const double hidden = static_cast<double>(model.hidden_size);
  const double tokens = context.local_tokens();
  const double element = context.activation_bytes();
  // The shared embedding's lookup of the shifted tokens, then Megatron-Core's column-parallel
  // eh_proj (2h → h/tp per rank) on the concatenated norms, gathered over tp.
  PassCosts costs = embedding_costs(context);
  const GemmPassTimes gemm = gemm_pass_times(
      context, context.precision, {{tokens, hidden / static_cast<double>(context.tp), 2 * hidden}});
  const double norm_bytes = 2 * 2 * element * context.norm_tokens() * hidden;  // enorm, hnorm
  costs.forward.compute_s += gemm.forward_s + memory_bound_time_s(gpu, norm_bytes, 2);
  costs.backward_input.compute_s += gemm.input_s + memory_bound_time_s(gpu, 2 * norm_bytes, 2);
  costs.backward_weight.compute_s += gemm.weight_s;
  costs.forward_flops += gemm.forward_flops;
  costs.forward.kernels += 3;
  costs.backward_input.kernels += 3;
  costs.backward_weight.kernels += 1;
  if (context.tp > 1) {
    const double bytes = tokens * hidden * element;
    costs.forward.tp_comm_s +=
        collective_time_s(*context.cluster, context.tp_span, Collective::all_gather, bytes);
    costs.backward_input.tp_comm_s +=
        collective_time_s(*context.cluster, context.tp_span, Collective::all_reduce, bytes);
    costs.forward.kernels += 1;
    costs.backward_input.kernels += 1;
  }
  return costs;
}

PassCosts lm_head_costs(const LayerContext& context) {
  const schemas::ModelConfig& model = *context.model;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const double hidden = static_cast<double>(model.hidden_size);
  const double tokens = context.local_tokens();
  const double vocab = static_cast<double>(model.vocab_size) / static_cast<double>(context.tp);
  const double element = context.activation_bytes();
  // Under fp8, mxfp8 and nvfp4 the LM head stays in 16 bits: Transformer Engine replaces only the
  // transformer layers' linears, and Megatron's output layer is a plain bf16 GEMM.
  const Dtype head_dtype =
      schemas::quantises_gemms(context.precision) ? Dtype::bf16 : context.precision;
  const GemmPassTimes gemm = gemm_pass_times(context, head_dtype, {{tokens, vocab, hidden}});
  // Final norm, then Megatron's vocab-parallel cross-entropy in fp32: cast, max, exp-sum,
  // normalise forward; softmax minus one-hot, cast back, backward.
  const double norm_bytes = 2 * element * context.norm_tokens() * hidden;
  const double loss_forward_bytes = tokens * vocab * (element + 3 * 4);
  const double loss_backward_bytes = tokens * vocab * (2 * 4 + element);
  // One exponential per logit forward (the sum of exponentials) and backward (the softmax).
  const double loss_evaluations = tokens * vocab;
  constexpr double kLossForwardKernels = 3;
  constexpr double kLossBackwardKernels = 2;
  PassCosts costs;
  costs.forward.compute_s =
      gemm.forward_s + memory_bound_time_s(gpu, norm_bytes, 1) +
      elementwise_time_s(gpu, loss_forward_bytes, loss_evaluations, kLossForwardKernels);
  costs.backward_input.compute_s =
      gemm.input_s + memory_bound_time_s(gpu, 2 * norm_bytes, 1) +
      elementwise_time_s(gpu, loss_backward_bytes, loss_evaluations, kLossBackwardKernels);
  costs.backward_weight.compute_s = gemm.weight_s;
  costs.forward_flops = gemm.forward_flops;
  // The kernels issued: the GEMM, the norm and the loss's each way.
  costs.forward.kernels = 1 + 1 + kLossForwardKernels;
  costs.backward_input.kernels = 1 + 1 + kLossBackwardKernels;
  costs.backward_weight.kernels = 1;
  if (autocasts_parameters(context)) {
    // torch.autocast (unfused_elementwise.h): the fp32 final norm, its output and the head's
    // weight cast to 16 bits forward, their gradients cast back to fp32.
    constexpr double kMaster = kAutocastMasterBytes;
    const double stream = context.norm_tokens() * hidden;
    const double cast = kMaster + element;
    costs.forward.compute_s += memory_bound_time_s(gpu, 2 * (kMaster - element) * stream) +
                               memory_bound_time_s(gpu, cast * (stream + vocab * hidden), 2);
    costs.backward_input.compute_s +=
        memory_bound_time_s(gpu, 2 * 2 * (kMaster - element) * stream) +
        memory_bound_time_s(gpu, cast * stream, 1);
    costs.backward_weight.compute_s += memory_bound_time_s(gpu, cast * vocab * hidden, 1);
    costs.forward.kernels += 2;
    costs.backward_input.kernels += 1;
    costs.backward_weight.kernels += 1;
  }
  if (context.unfused_elementwise && !context.loss_gradient_in_logits) {
    // PyTorch's cross-entropy backward writes the one-hot gradient (zeros, then a scatter) and
    // runs log-softmax's backward (read the gradient and the output, write) before the cast:
    // 4 + 3·4 bytes per logit and two kernels beyond the fused pair.
    costs.backward_input.compute_s += memory_bound_time_s(gpu, tokens * vocab * 4 * 4, 2);
    costs.backward_input.kernels += 2;
  }
  if (context.tp > 1) {
    costs.forward.kernels += 3 + (context.sequence_parallel ? 1 : 0);
    costs.backward_input.kernels += 1;
    const double bytes = tokens * hidden * element;
    // Sequence parallelism gathers the hidden states before the head and reduce-scatters their
    // gradient; without it the head's input gradient is all-reduced. The loss's three small
    // all-reduces (max, sum, target logit) are latency.
    const double small = 3 * collective_time_s(*context.cluster, context.tp_span,
                                               Collective::all_reduce, tokens * 4);
    costs.forward.tp_comm_s =
        small + (context.sequence_parallel ? collective_time_s(*context.cluster, context.tp_span,
                                                               Collective::all_gather, bytes)
                                           : 0);
    costs.backward_input.tp_comm_s = collective_time_s(
        *context.cluster, context.tp_span,
        context.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce, bytes);
  }
  if (context.zero3_layer_gathers) {
    // The head is gathered during the last layer's forward (counted there); its gradient's
    // reduce-scatter and the last layer's gather for the backward run beside its backward.
    const ParameterBreakdown counts = count_parameters(model);
    const double head_parameters =
        static_cast<double>(counts.lm_head) / static_cast<double>(context.tp) +
        static_cast<double>(counts.final_norm);
    const double comm_s =
        zero3_collectives(context, head_parameters).scatter_s +
        zero3_collectives(
            context, largest_layer_parameters_on_rank(counts, context.tp, context.ep, context.etp))
            .gather_s;
    costs.backward_input.dp_comm_s = beside_compute_s(
        context, comm_s, costs.backward_input.compute_s + costs.backward_weight.compute_s);
    costs.backward_input.kernels += 2;
  }
  charge_host_issue(context, costs);
  return costs;
}

}  // namespace strata::costmodels
