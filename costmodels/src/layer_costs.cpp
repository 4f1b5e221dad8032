#include "strata/costmodels/layer_costs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

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
namespace {

using schemas::Dtype;
using schemas::RecomputeGranularity;

// A layer pass's tensor-parallel collectives over T·h activations: one all-reduce per block
// (attention, and the MLP or a MoE layer's shared experts), or under sequence parallelism an
// all-gather before and a reduce-scatter after each block — the same bytes on the wire.
double tp_layer_comm_s(const LayerContext& context, double bytes, double blocks) {
  if (context.tp <= 1) return 0;
  if (context.sequence_parallel) {
    return blocks *
           (collective_time_s(*context.cluster, context.tp_span, Collective::all_gather, bytes) +
            collective_time_s(*context.cluster, context.tp_span, Collective::reduce_scatter,
                              bytes));
  }
  return blocks *
         collective_time_s(*context.cluster, context.tp_span, Collective::all_reduce, bytes);
}

// What a pass's tensor-parallel collectives add to its GEMMs when each is pipelined with the
// GEMM it feeds or drains (tp_comm_overlap): in forward the all-gathers feed the qkv and fc1
// GEMMs and the reduce-scatters drain the output projections; in backward the mirror pairs each
// input-gradient GEMM with one collective of the same bytes. Split into tp chunks, a pair takes
// the longer of the two — the GEMM slowed by the SMs and HBM the collective takes — plus one
// chunk of the shorter, which nothing hides (the first gather before any GEMM can start, or the
// last reduce after the GEMM ends). The excess over the GEMM alone is the pass's tp time.
double overlapped_tp_comm_s(const LayerContext& context, const std::vector<double>& gemms_s,
                            double bytes) {
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const double chunks = static_cast<double>(context.tp);
  // One all-gather and one reduce-scatter per block, of the same bytes: half the pairs each.
  const double gather_s =
      collective_time_s(*context.cluster, context.tp_span, Collective::all_gather, bytes);
  const double scatter_s =
      collective_time_s(*context.cluster, context.tp_span, Collective::reduce_scatter, bytes);
  double exposed = 0;
  for (std::size_t i = 0; i < gemms_s.size(); ++i) {
    const double gemm_s = gemms_s[i];
    const double comm_s = i % 2 == 0 ? gather_s : scatter_s;
    const double slowed = gemm_s * (1 + gpu.compute_slowdown_under_communication);
    exposed += std::max(slowed, comm_s) + std::min(gemm_s, comm_s) / chunks - gemm_s;
  }
  return exposed;
}

double ceil_div(double a, double b) { return std::ceil(a / b); }

// ZeRO-3 layer by layer: gathering `parameters` (this rank's tp shard of them, in 16 bits) over
// `span`, the shard group of `shards` ranks, and reduce-scattering their gradients (at the
// gradient accumulator's width).
struct Zero3Collectives {
  double gather_s = 0;
  double scatter_s = 0;
};
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
Zero3Collectives zero3_collectives(const LayerContext& context, double parameters) {
  return zero3_collectives_over(context, context.dp_span, context.zero_shards, parameters);
}

// A layer's: its dense parameters over the dp·cp shard group, a MoE layer's routed experts over
// the expert data-parallel shard group (their replicas priced on the dense replicas' span).
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

// What a collective adds to the compute it runs beside: the part it outlasts the compute by,
// plus the compute's slowdown while they overlap (NCCL takes SMs and HBM).
double beside_compute_s(const LayerContext& context, double comm_s, double compute_s) {
  const double slowdown = context.cluster->gpu.compute_slowdown_under_communication;
  return std::max(0.0, comm_s - compute_s) + slowdown * std::min(comm_s, compute_s);
}

// Bytes the casts to the GEMMs' low-precision format move in one layer pass (Transformer
// Engine). Every quantised GEMM needs its input in that format and, for the weight gradient,
// transposed: a cast-transpose kernel reads the 16-bit tensor once and writes both, `q` bytes
// each with the block scales (2 + 2q per element: 4 for fp8, 4.06 for mxfp8, whose 1×32 blocks
// run along the reduction dimension and so are quantised again for the transpose, 3.1 for nvfp4,
// whose columnwise copy takes its random Hadamard transform in the same kernel). The inputs of
// the qkv and fc1 GEMMs come out of the preceding norm already quantised (LayerNormLinear), which
// leaves only the transposed copy (q bytes); those of the output projection and fc2 are cast on
// their own. In the backward each GEMM's output gradient is cast-transposed the same way. Weights
// are cast once per step, not per micro-batch (plan_costs.cpp).
struct QuantisingCastBytes {
  double forward = 0;
  double backward = 0;
};
QuantisingCastBytes quantising_cast_bytes(const LayerContext& context, LayerKind kind) {
  const double tokens = context.local_tokens();
  const LocalLayerDims d = local_layer_dims(context, kind);
  const double written = schemas::dtype_bytes(context.precision);
  const double cast_transpose = cast_transpose_bytes_per_element(context.precision);
  QuantisingCastBytes bytes;
  bytes.forward = (d.ffn > 0 ? 2.0 : 1.0) * written * tokens * d.hidden +
                  cast_transpose * tokens * (d.heads * d.value_dim + d.ffn);
  bytes.backward = cast_transpose * tokens *
                   ((d.heads + d.kv_heads) * d.head_dim + d.kv_heads * d.value_dim + d.hidden +
                    (d.ffn > 0 ? d.gate * d.ffn + d.hidden : 0.0));
  return bytes;
}

// The attention block's forward GEMMs on one tp rank, in order, and how many of the first ones
// take the block's gathered input (what sequence parallelism's all-gather feeds; the last GEMM,
// the output projection, drains into its reduce-scatter). Multi-head attention: the fused QKV
// projection and the output projection. Latent attention: the query and key-value down
// projections (whole on every tp rank), their up projections (split over tp), and the output.
struct AttentionGemms {
  std::vector<GemmShape> shapes;
  std::size_t fed = 1;
};
AttentionGemms attention_gemms(const LayerContext& context) {
  const LocalLayerDims d = local_layer_dims(context);
  const double tokens = context.local_tokens();
  const schemas::ModelConfig& model = *context.model;
  if (!model.mla) {
    return {{{tokens, (d.heads + 2 * d.kv_heads) * d.head_dim, d.hidden},
             {tokens, d.hidden, d.heads * d.head_dim}},
            1};
  }
  const schemas::MlaConfig& mla = *model.mla;
  const double q_lora = static_cast<double>(mla.q_lora_rank);
  const double kv_lora = static_cast<double>(mla.kv_lora_rank);
  const double rope = static_cast<double>(mla.qk_rope_head_dim);
  const double nope = static_cast<double>(mla.qk_nope_head_dim);
  AttentionGemms gemms;
  if (mla.q_lora_rank > 0) {
    gemms.shapes.push_back({tokens, q_lora, d.hidden});
    gemms.shapes.push_back({tokens, d.heads * d.head_dim, q_lora});
  } else {
    gemms.shapes.push_back({tokens, d.heads * d.head_dim, d.hidden});
  }
  gemms.shapes.push_back({tokens, kv_lora + rope, d.hidden});
  gemms.shapes.push_back({tokens, d.heads * (nope + d.value_dim), kv_lora});
  gemms.fed = gemms.shapes.size();
  gemms.shapes.push_back({tokens, d.hidden, d.heads * d.value_dim});
  return gemms;
}

// Each pass's host issue time from its kernel count (costs built without it: the counts only).
// A kernel replayed from a CUDA graph costs the host nothing of its own; each graph one launch.
void charge_host_issue(const LayerContext& context, PassCosts& costs) {
  const bool whole_step = context.graphed(schemas::CudaGraphScope::full_iteration);
  for (PassTime* pass :
       {&costs.forward, &costs.backward_input, &costs.backward_weight, &costs.recompute}) {
    const double issued = pass->kernels - pass->graphed_kernels + pass->graphs;
    pass->host_issue_s = whole_step ? 0.0 : issued * context.eager_issue_s_per_kernel;
  }
}

// Kernels of attention's core: flash runs one fused kernel forward and two backward (the
// preprocessing of dO·O, then the gradients); unfused runs QKᵀ, the fused scale-mask-softmax,
// dropout and PV, and backward each one's gradients (two per product).
struct AttentionKernels {
  double forward = 0;
  double backward = 0;
};
AttentionKernels attention_kernels(schemas::AttentionKernel kernel, bool dropout) {
  if (kernel == schemas::AttentionKernel::flash) return {1, 2};
  const double dropout_kernels = dropout ? 1 : 0;
  return {3 + dropout_kernels, 5 + dropout_kernels};
}

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
                      .gate = model.mlp_activation == schemas::MlpActivation::swiglu ? 2.0 : 1.0,
                      .value_dim = static_cast<double>(model.head_dim),
                      .latent = 0};
  if (model.mla) {
    dims.value_dim = static_cast<double>(model.mla->v_head_dim);
    dims.latent = static_cast<double>(model.mla->q_lora_rank + model.mla->kv_lora_rank +
                                      model.mla->qk_rope_head_dim);
  }
  return dims;
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

PassCosts transformer_layer_costs(const LayerContext& context, RecomputeGranularity recompute,
                                  LayerKind kind) {
  const schemas::ModelConfig& model = *context.model;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const double tokens = context.local_tokens();
  const double norm_tokens = context.norm_tokens();
  const LocalLayerDims dims = local_layer_dims(context, kind);
  const double hidden = dims.hidden;
  const double head_dim = dims.head_dim;
  const double heads = dims.heads;
  const double kv_heads = dims.kv_heads;
  const double ffn = dims.ffn;  // a MoE layer's shared experts, 0 without any
  const bool swiglu = dims.gate == 2;
  const double element = context.activation_bytes();
  const bool has_mlp = ffn > 0;

  // The attention's GEMMs, then the MLP's (the dense MLP or the shared experts): fc1, fc2.
  const AttentionGemms attention_shapes = attention_gemms(context);
  std::vector<GemmShape> shapes = attention_shapes.shapes;
  if (has_mlp) {
    shapes.push_back({tokens, (swiglu ? 2 : 1) * ffn, hidden});
    shapes.push_back({tokens, hidden, ffn});
  }
  const GemmPassTimes gemms = gemm_pass_times(context, context.precision, shapes);

  // Latent attention's queries and keys are head_dim wide, its values value_dim: the kernel's
  // two products are priced at their mean width, which gives their FLOPs exactly.
  const AttentionShape attention_shape{
      .batch = static_cast<double>(context.micro_batch_size),
      .heads = heads,
      .query_tokens = static_cast<double>(context.seq_length) / static_cast<double>(context.cp),
      .key_tokens = static_cast<double>(context.seq_length),
      .head_dim = (head_dim + dims.value_dim) / 2};
  const AttentionFlops attention = causal_attention_flops(attention_shape);
  // Context parallelism attends chunk by chunk (one kernel call per visible block of
  // seq / 2·cp keys): at its own measured rate where the profile has one.
  std::optional<schemas::GpuProfile> chunked;
  if (context.cp > 1 && gpu.context_parallel_attention_efficiency) {
    chunked = gpu;
    chunked->attention_efficiency = gpu.context_parallel_attention_efficiency;
  }
  const AttentionTime attention_times = attention_time(chunked ? *chunked : gpu, context.precision,
                                                       context.attention, attention_shape);
  const double attention_forward_s = attention_times.forward_s;
  const double attention_backward_s = attention_times.backward_s;

  // Bytes moved by the memory-bound kernels of the forward. The activation is priced on its own:
  // its tanh or sigmoid per element may bound it instead (elementwise_time_s), once forward and
  // once backward.
  const double mask_bytes = model.dropout > 0 ? 1.0 : 0.0;
  double memory_bytes = 2 * (2 * element) * norm_tokens * hidden;         // two norms
  memory_bytes += 2 * (3 * element + mask_bytes) * norm_tokens * hidden;  // bias-dropout-adds
  const double activation_bytes = (swiglu ? 3.0 : 2.0) * element * tokens * ffn;
  const double activation_evaluations = tokens * ffn;
  if (model.position_embedding == schemas::PositionEmbedding::rope) {
    memory_bytes += 2 * element * tokens * (heads + kv_heads) * head_dim;  // rotary on q, k
  }
  // Latent attention's norms of its q and kv latents.
  memory_bytes += 2 * element * tokens * dims.latent;
  // What an unfused stack runs beyond these kernels (framework_behaviour.h).
  const UnfusedElementwise unfused = unfused_elementwise(context, dims, shapes);
  memory_bytes += unfused.widened_forward_bytes;
  double memory_backward_bytes = 2 * memory_bytes;
  if (schemas::quantises_gemms(context.precision)) {
    const QuantisingCastBytes casts = quantising_cast_bytes(context, kind);
    memory_bytes += casts.forward;
    memory_backward_bytes += casts.backward;
  }
  // Their kernels: two norms, two residual adds (bias and dropout fused in), the activation,
  // rotary; the backward has about two for each; quantised GEMMs add the casts no norm fuses.
  const bool rope = model.position_embedding == schemas::PositionEmbedding::rope;
  const double elementwise_kernels = (rope ? 6 : 5) - (has_mlp ? 0 : 1) + (model.mla ? 2 : 0);
  const bool fp8 = schemas::quantises_gemms(context.precision);
  // Dropout on both residual branches draws a keep decision per element in the forward and
  // again in the backward (the executor regenerates the mask rather than storing it).
  const double dropout_s =
      model.dropout > 0 ? random_number_time_s(gpu, 2 * norm_tokens * hidden) : 0.0;
  const double activation_forward_s =
      has_mlp ? elementwise_time_s(gpu, activation_bytes, activation_evaluations, 1) : 0.0;
  const double activation_backward_s =
      has_mlp ? elementwise_time_s(gpu, 2 * activation_bytes, activation_evaluations, 2) : 0.0;
  // The memory-bound kernels besides the activation (a layer without an MLP of its own has none),
  // and with it (what the host issues).
  const double activation_forward_kernels = has_mlp ? 1 : 0;
  const double activation_backward_kernels = has_mlp ? 2 : 0;
  const double memory_forward_kernels =
      elementwise_kernels - activation_forward_kernels + (fp8 ? 2 : 0);
  const double memory_backward_kernels =
      2 * (elementwise_kernels - activation_forward_kernels) + (fp8 ? 4 : 0);
  const double memory_forward_s =
      memory_bound_time_s(gpu, memory_bytes, memory_forward_kernels) + activation_forward_s +
      dropout_s + memory_bound_time_s(gpu, unfused.forward_bytes, unfused.forward_kernels);
  const double memory_backward_s =
      memory_bound_time_s(gpu, memory_backward_bytes, memory_backward_kernels) +
      activation_backward_s + dropout_s +
      memory_bound_time_s(gpu, unfused.backward_input_bytes, unfused.backward_input_kernels);

  // The blocks whose input sequence parallelism gathers and whose output it reduce-scatters:
  // attention, and the MLP (a MoE layer's shared experts; its routed experts take their tokens
  // by all-to-all, moe_block_costs.h).
  const double tp_bytes = tokens * hidden * element;
  double tp_forward_s = tp_layer_comm_s(context, tp_bytes, has_mlp ? 2.0 : 1.0);
  double tp_backward_s = tp_forward_s;
  if (context.tp_comm_overlap && context.sequence_parallel && context.tp > 1) {
    // Each collective beside the GEMMs it feeds or drains, in block order: the attention's
    // input GEMMs (fed), its output projection (drains), fc1 (fed), fc2 (drains).
    const auto paired = [&](const std::vector<double>& each_s) {
      const std::size_t fed = attention_shapes.fed;
      std::vector<double> pairs{0.0, each_s[fed]};
      for (std::size_t i = 0; i < fed; ++i) pairs[0] += each_s[i];
      if (has_mlp)
        pairs.insert(pairs.end(), each_s.begin() + static_cast<long>(fed) + 1, each_s.end());
      return pairs;
    };
    // The overlap runs each paired GEMM as tp chunks of its tokens, each chunk a GEMM of its own
    // (Transformer Engine's userbuffers): small chunks fill fewer waves of tiles, which the
    // overlap costs beyond the whole GEMM's time. Priced where the GPU's GEMMs are priced by
    // their tiles (gpu.gemm_tiles); a curve indexed by FLOPs, fitted to whole GEMMs, cannot tell
    // a chunk's lost waves from a small GEMM's and keeps the whole GEMM's time.
    const bool by_tiles = gpu.gemm_tiles && gpu.streaming_multiprocessors;
    const double chunks = by_tiles ? static_cast<double>(context.tp) : 1.0;
    std::vector<GemmShape> chunk_shapes = shapes;
    for (GemmShape& shape : chunk_shapes) shape.m /= chunks;
    const GemmPassTimes chunked = gemm_pass_times(context, context.precision, chunk_shapes);
    const auto scaled = [&](std::vector<double> each_s) {
      for (double& time_s : each_s) time_s *= chunks;
      return each_s;
    };
    const auto chunking_s = [&](const std::vector<double>& whole_s,
                                const std::vector<double>& chunk_s) {
      double extra = 0;
      for (std::size_t i = 0; i < whole_s.size(); ++i) {
        extra += std::max(0.0, chunks * chunk_s[i] - whole_s[i]);
      }
      return extra;
    };
    tp_forward_s = overlapped_tp_comm_s(context, paired(scaled(chunked.forward_each_s)), tp_bytes) +
                   chunking_s(gemms.forward_each_s, chunked.forward_each_s);
    tp_backward_s = overlapped_tp_comm_s(context, paired(scaled(chunked.input_each_s)), tp_bytes) +
                    chunking_s(gemms.input_each_s, chunked.input_each_s);
  }

  double cp_forward_s = 0;
  double cp_backward_s = 0;
  double cp_memory_forward_s = 0;
  double cp_memory_backward_s = 0;
  double cp_forward_kernels = 0;
  double cp_backward_kernels = 0;
  if (context.cp > 1) {
    const double cp = static_cast<double>(context.cp);
    const double kv_bytes = tokens * kv_heads * (head_dim + dims.value_dim) * element;
    // The keys and values are copied out of the fused qkv into a buffer of their own to be sent
    // (read and write), in each pass. In the backward each source's key/value gradient is
    // accumulated in a zeroed buffer and added into the rank's qkv gradient at the end (read the
    // buffer, read and write the gradient); the ring also adds each arriving partial sum to the
    // rank's own contribution (two reads, a write) at each of its cp − 1 later steps.
    const bool ring = context.cp_comm != schemas::ContextParallelComm::all_gather;
    const double extract_bytes = 2 * kv_bytes;
    const double backward_bytes =
        extract_bytes + cp * kv_bytes + 3 * kv_bytes + (ring ? (cp - 1) * 3 * kv_bytes : 0.0);
    const double backward_kernels = ring ? 2 * cp + 1 : 3;
    cp_memory_forward_s = memory_bound_time_s(gpu, extract_bytes);
    cp_memory_backward_s = memory_bound_time_s(gpu, backward_bytes, backward_kernels);
    cp_forward_kernels = 1;
    cp_backward_kernels = backward_kernels;
    if (!ring) {
      const double whole = cp * kv_bytes;
      const double gather_s =
          collective_time_s(*context.cluster, context.cp_span, Collective::all_gather, whole);
      cp_forward_s = gather_s;
      cp_backward_s = gather_s + collective_time_s(*context.cluster, context.cp_span,
                                                   Collective::reduce_scatter, whole);
      cp_forward_kernels += 1;
      cp_backward_kernels += 2;
    } else {
      // Each of the cp − 1 hops runs beside the attention of the block in hand, but only by the
      // communicator's progress share while the rank computes (Open MPI without a progress
      // thread moves a message inside MPI calls only: the rest waits for the rank's wait); NCCL
      // and every preset: all of it. The backward's key/value gradients travel one hop more:
      // the sum of the last step arrives after the rank's last compute, with nothing to hide it.
      const double progress = context.cluster->communicator_progress_during_compute.value_or(1.0);
      const double steps = cp - 1;
      // A send and a receive per hop; the backward's last hop adds a pair.
      cp_forward_kernels += 2 * steps;
      cp_backward_kernels += 2 * steps + 2;
      const auto exposed = [&](double transfer_s, double compute_s) {
        return std::max(0.0, progress * transfer_s - compute_s) + (1 - progress) * transfer_s;
      };
      cp_forward_s =
          exposed(steps * point_to_point_time_s(*context.cluster, context.cp_tier, kv_bytes),
                  attention_forward_s);
      cp_backward_s =
          exposed(steps * point_to_point_time_s(*context.cluster, context.cp_tier, 2 * kv_bytes),
                  attention_backward_s) +
          point_to_point_time_s(*context.cluster, context.cp_tier, kv_bytes);
    }
  }

  PassCosts costs;
  costs.forward = {gemms.forward_s + attention_forward_s + memory_forward_s + cp_memory_forward_s,
                   tp_forward_s, cp_forward_s};
  costs.backward_input = {
      gemms.input_s + attention_backward_s + memory_backward_s + cp_memory_backward_s,
      tp_backward_s, cp_backward_s};
  costs.backward_weight = {gemms.weight_s + memory_bound_time_s(gpu, unfused.backward_weight_bytes,
                                                                unfused.backward_weight_kernels),
                           0, 0};
  costs.forward_flops = gemms.forward_flops + attention.forward;
  // The kernels each pass issues: its GEMMs, attention's, the memory-bound ones priced above and
  // the collectives (tp: one all-reduce per block, or an all-gather and a reduce-scatter).
  const double gemm_kernels = static_cast<double>(shapes.size());
  const AttentionKernels attention_count = attention_kernels(context.attention, model.dropout > 0);
  const double block_collectives = context.tp > 1 ? (context.sequence_parallel ? 2.0 : 1.0) : 0.0;
  const double tp_collectives = (has_mlp ? 2.0 : 1.0) * block_collectives;
  costs.forward.kernels = gemm_kernels + attention_count.forward + memory_forward_kernels +
                          activation_forward_kernels + tp_collectives + cp_forward_kernels +
                          unfused.forward_kernels;
  costs.backward_input.kernels = gemm_kernels + attention_count.backward + memory_backward_kernels +
                                 activation_backward_kernels + tp_collectives +
                                 cp_backward_kernels + unfused.backward_input_kernels;
  costs.backward_weight.kernels = gemm_kernels + unfused.backward_weight_kernels;
  std::optional<MoeBlockCosts> expert_costs;
  if (kind == LayerKind::moe) expert_costs = moe_block_costs(context);
  if (expert_costs) {
    const MoeBlockCosts& experts = *expert_costs;
    costs.forward += experts.forward;
    costs.backward_input += experts.backward_input;
    costs.backward_weight += experts.backward_weight;
    costs.forward_flops += experts.forward_flops;
    if (context.ep_comm_overlap) {
      // Beside the other micro-batch's compute of the same size: only what outlasts it shows,
      // plus the compute's slowdown while they share the GPU.
      costs.forward.ep_comm_s =
          beside_compute_s(context, experts.forward.ep_comm_s, costs.forward.compute_s);
      costs.backward_input.ep_comm_s =
          beside_compute_s(context, experts.backward_input.ep_comm_s,
                           costs.backward_input.compute_s + costs.backward_weight.compute_s);
    }
  }
  // The blocks replayed from CUDA graphs (schemas::CudaGraphScope), with the kernels counted
  // above: attention's GEMMs, core, its norm, residual add, rotary, latent norms, fp8 cast and tp
  // collectives; a dense MLP's two GEMMs, activation, norm, residual add, fp8 cast and
  // collectives; each backward mirrors its forward's element-wise kernels twice.
  {
    using schemas::CudaGraphScope;
    const double cast = fp8 ? 1.0 : 0.0;
    if (context.graphed(CudaGraphScope::attn)) {
      const double attention_gemms = static_cast<double>(attention_shapes.shapes.size());
      const double elementwise = 2 + (rope ? 1 : 0) + (model.mla ? 2 : 0);
      costs.forward.capture(attention_gemms + attention_count.forward + elementwise + cast +
                            block_collectives);
      costs.backward_input.capture(attention_gemms + attention_count.backward + 2 * elementwise +
                                   2 * cast + block_collectives);
      costs.backward_weight.capture(attention_gemms);
    }
    if (context.graphed(CudaGraphScope::mlp) && kind == LayerKind::dense && has_mlp) {
      costs.forward.capture(2 + activation_forward_kernels + 2 + cast + block_collectives);
      costs.backward_input.capture(2 + activation_backward_kernels + 2 * 2 + 2 * cast +
                                   block_collectives);
      costs.backward_weight.capture(2);
    }
    if (expert_costs && context.graphed(CudaGraphScope::moe)) {
      costs.forward.capture(expert_costs->forward.kernels);
      costs.backward_input.capture(expert_costs->backward_input.kernels);
      costs.backward_weight.capture(expert_costs->backward_weight.kernels);
    }
    if (expert_costs && context.graphed(CudaGraphScope::moe_router)) {
      costs.forward.capture(expert_costs->router_kernels.forward);
      costs.backward_input.capture(expert_costs->router_kernels.backward_input);
      costs.backward_weight.capture(expert_costs->router_kernels.backward_weight);
    }
    if (expert_costs && context.graphed(CudaGraphScope::moe_preprocess)) {
      costs.forward.capture(expert_costs->preprocess_kernels);
    }
  }
  if (recompute == RecomputeGranularity::full) {
    costs.recompute = costs.forward;
    costs.recompute_flops = costs.forward_flops;
  } else if (recompute == RecomputeGranularity::selective) {
    // Each module the plan names runs its forward again before the layer's backward.
    using schemas::RecomputeModule;
    const auto gemm_flops = [](const GemmShape& shape) { return 2 * shape.m * shape.n * shape.k; };
    if (context.recomputes(RecomputeModule::core_attn)) {
      costs.recompute.compute_s += attention_forward_s;
      costs.recompute.kernels += attention_count.forward;
      costs.recompute_flops += attention.forward;
    }
    if (context.recomputes(RecomputeModule::mla_up_proj) && model.mla) {
      // The up projections: the queries' (with a query latent) and the keys' and values'.
      std::vector<std::size_t> up{attention_shapes.fed - 1};
      if (model.mla->q_lora_rank > 0) up.push_back(1);
      for (std::size_t i : up) {
        costs.recompute.compute_s += gemms.forward_each_s[i];
        costs.recompute.kernels += 1;
        costs.recompute_flops += gemm_flops(shapes[i]);
      }
    }
    if (context.recomputes(RecomputeModule::mlp) && kind == LayerKind::dense && has_mlp) {
      // fc1, the activation and fc2 from the MLP's input, with the block's tp collectives.
      const std::size_t fc1 = shapes.size() - 2;
      costs.recompute.compute_s +=
          gemms.forward_each_s[fc1] + gemms.forward_each_s[fc1 + 1] + activation_forward_s;
      costs.recompute.tp_comm_s += tp_layer_comm_s(context, tp_bytes, 1.0);
      costs.recompute.kernels += 3 + block_collectives;
      costs.recompute_flops += gemm_flops(shapes[fc1]) + gemm_flops(shapes[fc1 + 1]);
    }
    if (expert_costs) {
      if (context.recomputes(RecomputeModule::layernorm)) {
        // The pre-MLP norm, a module of its own before the router (read and write the tokens).
        costs.recompute.compute_s += memory_bound_time_s(gpu, 2 * element * norm_tokens * hidden);
        costs.recompute.kernels += 1;
      }
      if (context.recomputes(RecomputeModule::moe_act)) {
        costs.recompute.compute_s += expert_costs->activation_forward.compute_s;
        costs.recompute.kernels += expert_costs->activation_forward.kernels;
      }
    }
  }
  if (context.zero3_layer_gathers) {
    // The next layer's gather runs during this layer's forward; in the backward, the previous
    // layer's gather and this layer's reduce-scatter run during this layer's backward (with its
    // recomputation). A recomputed forward uses the parameters gathered for the backward.
    const Zero3Collectives collectives = zero3_collectives(context, kind);
    costs.forward.dp_comm_s =
        beside_compute_s(context, collectives.gather_s, costs.forward.compute_s);
    costs.backward_input.dp_comm_s =
        beside_compute_s(context, collectives.gather_s + collectives.scatter_s,
                         costs.recompute.compute_s + costs.backward_input.compute_s +
                             costs.backward_weight.compute_s);
    costs.forward.kernels += 1;
    costs.backward_input.kernels += 2;
  }
  charge_host_issue(context, costs);
  return costs;
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
