#include "strata/costmodels/layer_costs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "strata/costmodels/attention_time.h"
#include "strata/costmodels/framework_behaviour.h"
#include "strata/costmodels/kernel_time.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::costmodels {
namespace {

using schemas::Dtype;
using schemas::RecomputeGranularity;

struct GemmShape {
  double m = 0, n = 0, k = 0;
};

// Forward, input-gradient and weight-gradient times of a list of forward GEMM shapes, in sum
// and (forward and input gradient) per shape.
struct GemmPassTimes {
  double forward_s = 0, input_s = 0, weight_s = 0, forward_flops = 0;
  std::vector<double> forward_each_s, input_each_s;
};

// Bytes per weight that a weight-gradient GEMM's epilogue moves beyond what the calibrated GEMM
// curve already covers. The GEMM adds into the gradient accumulator (Megatron's gradient
// accumulation fusion): it reads and writes one accumulator element per weight every
// micro-batch. The curve was fitted to fp16 runs, whose accumulator has the GEMM output's width;
// fp32 main gradients under bf16 and fp8 read and write 2 more bytes each way, and in the
// epilogue no tensor-core work hides them. (4 bytes on every weight per micro-batch: with 4,096
// tokens the weight GEMM does 8,192 FLOPs per weight, so about 7% of it on an A100.)
double wide_accumulator_bytes_per_weight(const LayerContext& context) {
  const double accumulator =
      static_cast<double>(adam_model_state_bytes(context.precision).gradients);
  return 2 * std::max(0.0, accumulator - context.activation_bytes());
}

GemmPassTimes gemm_pass_times(const LayerContext& context, Dtype dtype,
                              std::initializer_list<GemmShape> shapes) {
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const double accumulator_bytes = wide_accumulator_bytes_per_weight(context);
  GemmPassTimes times;
  for (const GemmShape& shape : shapes) {
    // Y[m×n] = X[m×k]·W[k×n];  dX[m×k] = dY·Wᵀ;  dW[k×n] = Xᵀ·dY.
    times.forward_each_s.push_back(gemm_time_s(gpu, dtype, shape.m, shape.n, shape.k));
    times.input_each_s.push_back(gemm_time_s(gpu, dtype, shape.m, shape.k, shape.n));
    times.forward_s += times.forward_each_s.back();
    times.input_s += times.input_each_s.back();
    times.weight_s += gemm_time_s(gpu, dtype, shape.k, shape.n, shape.m) +
                      memory_bound_time_s(gpu, accumulator_bytes * shape.k * shape.n, 0);
    times.forward_flops += gemm_flops(shape.m, shape.n, shape.k);
  }
  return times;
}

// A layer pass's tensor-parallel collectives over T·h activations: one all-reduce per block
// (attention, MLP), or under sequence parallelism an all-gather before and a reduce-scatter after
// each block — the same bytes on the wire.
double tp_layer_comm_s(const LayerContext& context, double bytes) {
  if (context.tp <= 1) return 0;
  if (context.sequence_parallel) {
    return 2 *
           (collective_time_s(*context.cluster, context.tp_span, Collective::all_gather, bytes) +
            collective_time_s(*context.cluster, context.tp_span, Collective::reduce_scatter,
                              bytes));
  }
  return 2 * collective_time_s(*context.cluster, context.tp_span, Collective::all_reduce, bytes);
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
// the dp·cp group, and reduce-scattering their gradients (at the gradient accumulator's width).
struct Zero3Collectives {
  double gather_s = 0;
  double scatter_s = 0;
};
Zero3Collectives zero3_collectives(const LayerContext& context, double parameters) {
  const double gradient_bytes =
      static_cast<double>(adam_model_state_bytes(context.precision).gradients);
  Zero3Collectives collectives{
      .gather_s = collective_time_s(*context.cluster, context.dp_span, Collective::all_gather,
                                    parameters * context.activation_bytes()),
      .scatter_s = collective_time_s(*context.cluster, context.dp_span, Collective::reduce_scatter,
                                     parameters * gradient_bytes)};
  if (context.replica_span) {
    // Hybrid sharding: each reduced shard is then summed over its replicas.
    collectives.scatter_s +=
        collective_time_s(*context.cluster, *context.replica_span, Collective::all_reduce,
                          parameters / context.zero_shards * gradient_bytes);
  }
  return collectives;
}

// What a collective adds to the compute it runs beside: the part it outlasts the compute by,
// plus the compute's slowdown while they overlap (NCCL takes SMs and HBM).
double beside_compute_s(const LayerContext& context, double comm_s, double compute_s) {
  const double slowdown = context.cluster->gpu.compute_slowdown_under_communication;
  return std::max(0.0, comm_s - compute_s) + slowdown * std::min(comm_s, compute_s);
}

double layer_parameters_on_rank(const LayerContext& context) {
  const ParameterBreakdown counts = count_parameters(*context.model);
  return static_cast<double>(counts.attention_per_layer + counts.mlp_per_layer) /
             static_cast<double>(context.tp) +
         static_cast<double>(counts.norms_per_layer);
}

// Bytes the casts to fp8 move in one layer pass (Transformer Engine). Every fp8 GEMM needs its
// input in fp8 and, for the weight gradient, transposed in fp8: a cast-transpose kernel reads the
// 16-bit tensor once and writes both (2 + 1 + 1 bytes per element). The inputs of the qkv and fc1
// GEMMs come out of the preceding norm already in fp8 (LayerNormLinear), which leaves only the
// transposed copy (1 byte); those of the output projection and fc2 are cast on their own. In the
// backward each GEMM's output gradient is cast-transposed the same way (4 bytes per element).
// Weights are cast once per step, not per micro-batch (plan_costs.cpp).
struct FloatEightCastBytes {
  double forward = 0;
  double backward = 0;
};
FloatEightCastBytes fp8_cast_bytes(const LayerContext& context) {
  const double tokens = context.local_tokens();
  const auto [hidden, head_dim, heads, kv_heads, ffn, gate] = local_layer_dims(context);
  FloatEightCastBytes bytes;
  bytes.forward = 2 * 1.0 * tokens * hidden + 4.0 * tokens * (heads * head_dim + ffn);
  bytes.backward =
      4.0 * tokens * ((heads + 2 * kv_heads) * head_dim + hidden + gate * ffn + hidden);
  return bytes;
}

}  // namespace

PassTime& PassTime::operator+=(const PassTime& other) {
  compute_s += other.compute_s;
  tp_comm_s += other.tp_comm_s;
  cp_comm_s += other.cp_comm_s;
  dp_comm_s += other.dp_comm_s;
  return *this;
}

PassTime PassTime::scaled(double factor) const {
  return {compute_s * factor, tp_comm_s * factor, cp_comm_s * factor, dp_comm_s * factor};
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

LocalLayerDims local_layer_dims(const LayerContext& context) {
  const schemas::ModelConfig& model = *context.model;
  const double t = static_cast<double>(context.tp);
  return {.hidden = static_cast<double>(model.hidden_size),
          .head_dim = static_cast<double>(model.head_dim),
          .heads = static_cast<double>(model.num_attention_heads) / t,
          .kv_heads = ceil_div(static_cast<double>(model.num_kv_heads), t),
          .ffn = static_cast<double>(model.ffn_hidden_size) / t,
          .gate = model.mlp_activation == schemas::MlpActivation::swiglu ? 2.0 : 1.0};
}

LayerContext layer_context(const schemas::Plan& plan) {
  LayerContext context{
      .model = &plan.model,
      .cluster = &plan.cluster,
      .precision = plan.precision,
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
                             framework_behaviour(plan.framework).zero3_gathers_per_layer,
      .executor_activation_buffers =
          framework_behaviour(plan.framework).executor_activation_buffers,
      .dp_span = {},
      .replica_span = std::nullopt,
      .zero_shards = 1,
      .tp_span = group_span(plan.cluster, first_group_ranks(plan.mesh, {schemas::MeshAxis::tp})),
      .cp_comm = plan.cp_comm,
      .cp_tier = 0,
      .cp_span = {}};
  if (plan.mesh.cp > 1) {
    context.cp_tier =
        tier_between(plan.cluster, 0, schemas::axis_stride(plan.mesh, schemas::MeshAxis::cp));
    context.cp_span =
        group_span(plan.cluster, first_group_ranks(plan.mesh, {schemas::MeshAxis::cp}));
  }
  // Only per-layer ZeRO-3 reads it; the planner builds a context for every candidate.
  if (context.zero3_layer_gathers) {
    context.dp_span = group_span(plan.cluster, schemas::zero_shard_group_of(plan.mesh, 0));
    context.zero_shards = static_cast<double>(plan.mesh.zero_shard_dp() * plan.mesh.cp);
    if (plan.mesh.zero_replicas() > 1) {
      context.replica_span = group_span(plan.cluster, schemas::zero_replica_group_of(plan.mesh, 0));
    }
  }
  return context;
}

PassCosts transformer_layer_costs(const LayerContext& context, RecomputeGranularity recompute) {
  const schemas::ModelConfig& model = *context.model;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const double tokens = context.local_tokens();
  const double norm_tokens = context.norm_tokens();
  const auto [hidden, head_dim, heads, kv_heads, ffn, gate] = local_layer_dims(context);
  const bool swiglu = gate == 2;
  const double element = context.activation_bytes();

  const GemmPassTimes gemms = gemm_pass_times(context, context.precision,
                                              {{tokens, (heads + 2 * kv_heads) * head_dim, hidden},
                                               {tokens, hidden, heads * head_dim},
                                               {tokens, (swiglu ? 2 : 1) * ffn, hidden},
                                               {tokens, hidden, ffn}});

  const AttentionShape attention_shape{
      .batch = static_cast<double>(context.micro_batch_size),
      .heads = heads,
      .query_tokens = static_cast<double>(context.seq_length) / static_cast<double>(context.cp),
      .key_tokens = static_cast<double>(context.seq_length),
      .head_dim = head_dim};
  const AttentionFlops attention = causal_attention_flops(attention_shape);
  const AttentionTime attention_times =
      attention_time(gpu, context.precision, context.attention, attention_shape);
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
  double memory_backward_bytes = 2 * memory_bytes;
  if (context.precision == Dtype::fp8) {
    const FloatEightCastBytes casts = fp8_cast_bytes(context);
    memory_bytes += casts.forward;
    memory_backward_bytes += casts.backward;
  }
  // Their kernels: two norms, two residual adds (bias and dropout fused in), the activation,
  // rotary; the backward has about two for each; fp8 adds the casts that no norm fuses.
  const bool rope = model.position_embedding == schemas::PositionEmbedding::rope;
  const double elementwise_kernels = rope ? 6 : 5;
  const bool fp8 = context.precision == Dtype::fp8;
  // Dropout on both residual branches draws a keep decision per element in the forward and
  // again in the backward (the executor regenerates the mask rather than storing it).
  const double dropout_s =
      model.dropout > 0 ? random_number_time_s(gpu, 2 * norm_tokens * hidden) : 0.0;
  const double memory_forward_s =
      memory_bound_time_s(gpu, memory_bytes, elementwise_kernels - 1 + (fp8 ? 2 : 0)) +
      elementwise_time_s(gpu, activation_bytes, activation_evaluations, 1) + dropout_s;
  const double memory_backward_s =
      memory_bound_time_s(gpu, memory_backward_bytes,
                          2 * (elementwise_kernels - 1) + (fp8 ? 4 : 0)) +
      elementwise_time_s(gpu, 2 * activation_bytes, activation_evaluations, 2) + dropout_s;

  const double tp_bytes = tokens * hidden * element;
  double tp_forward_s = tp_layer_comm_s(context, tp_bytes);
  double tp_backward_s = tp_forward_s;
  if (context.tp_comm_overlap && context.sequence_parallel && context.tp > 1) {
    // The GEMMs in block order: qkv (fed), out-proj (drains), fc1 (fed), fc2 (drains).
    tp_forward_s = overlapped_tp_comm_s(context, gemms.forward_each_s, tp_bytes);
    tp_backward_s = overlapped_tp_comm_s(context, gemms.input_each_s, tp_bytes);
  }

  double cp_forward_s = 0;
  double cp_backward_s = 0;
  if (context.cp > 1) {
    const double kv_bytes = 2 * tokens * kv_heads * head_dim * element;
    if (context.cp_comm == schemas::ContextParallelComm::all_gather) {
      const double whole = static_cast<double>(context.cp) * kv_bytes;
      const double gather_s =
          collective_time_s(*context.cluster, context.cp_span, Collective::all_gather, whole);
      cp_forward_s = gather_s;
      cp_backward_s = gather_s + collective_time_s(*context.cluster, context.cp_span,
                                                   Collective::reduce_scatter, whole);
    } else {
      const double steps = static_cast<double>(context.cp - 1);
      cp_forward_s =
          std::max(0.0, steps * point_to_point_time_s(*context.cluster, context.cp_tier, kv_bytes) -
                            attention_forward_s);
      cp_backward_s = std::max(
          0.0, steps * point_to_point_time_s(*context.cluster, context.cp_tier, 2 * kv_bytes) -
                   attention_backward_s);
    }
  }

  PassCosts costs;
  costs.forward = {gemms.forward_s + attention_forward_s + memory_forward_s, tp_forward_s,
                   cp_forward_s};
  costs.backward_input = {gemms.input_s + attention_backward_s + memory_backward_s, tp_backward_s,
                          cp_backward_s};
  costs.backward_weight = {gemms.weight_s, 0, 0};
  costs.forward_flops = gemms.forward_flops + attention.forward;
  if (recompute == RecomputeGranularity::full) {
    costs.recompute = costs.forward;
    costs.recompute_flops = costs.forward_flops;
  } else if (recompute == RecomputeGranularity::selective) {
    costs.recompute = {attention_forward_s, 0, 0};
    costs.recompute_flops = attention.forward;
  }
  if (context.zero3_layer_gathers) {
    // The next layer's gather runs during this layer's forward; in the backward, the previous
    // layer's gather and this layer's reduce-scatter run during this layer's backward (with its
    // recomputation). A recomputed forward uses the parameters gathered for the backward.
    const Zero3Collectives collectives =
        zero3_collectives(context, layer_parameters_on_rank(context));
    costs.forward.dp_comm_s =
        beside_compute_s(context, collectives.gather_s, costs.forward.compute_s);
    costs.backward_input.dp_comm_s =
        beside_compute_s(context, collectives.gather_s + collectives.scatter_s,
                         costs.recompute.compute_s + costs.backward_input.compute_s +
                             costs.backward_weight.compute_s);
  }
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
  if (context.tp > 1) {
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
        embedding.gather_s + zero3_collectives(context, layer_parameters_on_rank(context)).gather_s;
    costs.backward_weight.dp_comm_s = embedding.scatter_s;
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
  // Under fp8 the LM head stays in 16 bits: Transformer Engine replaces only the transformer
  // layers' linears, and Megatron's output layer is a plain bf16 GEMM.
  const Dtype head_dtype = context.precision == Dtype::fp8 ? Dtype::bf16 : context.precision;
  const GemmPassTimes gemm = gemm_pass_times(context, head_dtype, {{tokens, vocab, hidden}});
  // Final norm, then Megatron's vocab-parallel cross-entropy in fp32: cast, max, exp-sum,
  // normalise forward; softmax minus one-hot, cast back, backward.
  const double norm_bytes = 2 * element * context.norm_tokens() * hidden;
  const double loss_forward_bytes = tokens * vocab * (element + 3 * 4);
  const double loss_backward_bytes = tokens * vocab * (2 * 4 + element);
  // One exponential per logit forward (the sum of exponentials) and backward (the softmax).
  const double loss_evaluations = tokens * vocab;
  PassCosts costs;
  costs.forward.compute_s = gemm.forward_s + memory_bound_time_s(gpu, norm_bytes, 1) +
                            elementwise_time_s(gpu, loss_forward_bytes, loss_evaluations, 3);
  costs.backward_input.compute_s =
      gemm.input_s + memory_bound_time_s(gpu, 2 * norm_bytes, 1) +
      elementwise_time_s(gpu, loss_backward_bytes, loss_evaluations, 2);
  costs.backward_weight.compute_s = gemm.weight_s;
  costs.forward_flops = gemm.forward_flops;
  if (context.tp > 1) {
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
    const double comm_s = zero3_collectives(context, head_parameters).scatter_s +
                          zero3_collectives(context, layer_parameters_on_rank(context)).gather_s;
    costs.backward_input.dp_comm_s = beside_compute_s(
        context, comm_s, costs.backward_input.compute_s + costs.backward_weight.compute_s);
  }
  return costs;
}

}  // namespace strata::costmodels
