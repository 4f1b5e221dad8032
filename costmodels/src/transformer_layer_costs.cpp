#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "layer_pass_parts.h"
#include "strata/costmodels/attention_time.h"
#include "strata/costmodels/framework_behaviour.h"
#include "strata/costmodels/gemm_passes.h"
#include "strata/costmodels/kernel_time.h"
#include "strata/costmodels/layer_costs.h"
#include "strata/costmodels/moe_block_costs.h"
#include "strata/costmodels/unfused_elementwise.h"

namespace strata::costmodels {
namespace {

using detail::beside_compute_s;
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
  std::vector<GemmShape> shapes{};
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

// What every part of one layer's costs reads: its local sizes, its GEMMs and their times.
struct LayerShape {
  const LayerContext& context;
  LayerKind kind;
  LocalLayerDims dims;
  double tokens = 0, norm_tokens = 0, element = 0;
  bool has_mlp = false, swiglu = false, rope = false, fp8 = false;
  // The attention's GEMMs, then the MLP's (the dense MLP or the shared experts): fc1, fc2.
  AttentionGemms attention{};
  std::vector<GemmShape> shapes{};
  GemmPassTimes gemms{};
};

LayerShape layer_shape(const LayerContext& context, LayerKind kind) {
  const schemas::ModelConfig& model = *context.model;
  LayerShape layer{.context = context, .kind = kind, .dims = local_layer_dims(context, kind)};
  layer.tokens = context.local_tokens();
  layer.norm_tokens = context.norm_tokens();
  layer.element = context.activation_bytes();
  layer.has_mlp = layer.dims.ffn > 0;  // a MoE layer's shared experts, 0 without any
  layer.swiglu = layer.dims.gate == 2;
  layer.rope = model.position_embedding == schemas::PositionEmbedding::rope;
  layer.fp8 = schemas::quantises_gemms(context.precision);
  layer.attention = attention_gemms(context);
  layer.shapes = layer.attention.shapes;
  if (layer.has_mlp) {
    layer.shapes.push_back(
        {layer.tokens, (layer.swiglu ? 2 : 1) * layer.dims.ffn, layer.dims.hidden});
    layer.shapes.push_back({layer.tokens, layer.dims.hidden, layer.dims.ffn});
  }
  layer.gemms = gemm_pass_times(context, context.precision, layer.shapes);
  return layer;
}

// Attention's core: its FLOPs and kernel times.
struct AttentionCore {
  AttentionFlops flops;
  double forward_s = 0, backward_s = 0;
};

AttentionCore attention_core(const LayerShape& layer) {
  const LayerContext& context = layer.context;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  // Latent attention's queries and keys are head_dim wide, its values value_dim: the kernel's
  // two products are priced at their mean width, which gives their FLOPs exactly.
  const AttentionShape shape{
      .batch = static_cast<double>(context.micro_batch_size),
      .heads = layer.dims.heads,
      .query_tokens = static_cast<double>(context.seq_length) / static_cast<double>(context.cp),
      .key_tokens = static_cast<double>(context.seq_length),
      .head_dim = (layer.dims.head_dim + layer.dims.value_dim) / 2};
  // Context parallelism attends chunk by chunk (one kernel call per visible block of
  // seq / 2·cp keys): at its own measured rate where the profile has one.
  std::optional<schemas::GpuProfile> chunked;
  if (context.cp > 1 && gpu.context_parallel_attention_efficiency) {
    chunked = gpu;
    chunked->attention_efficiency = gpu.context_parallel_attention_efficiency;
  }
  const schemas::GpuProfile& kernel_gpu = chunked ? *chunked : gpu;
  const AttentionTime times =
      attention_time(kernel_gpu, context.precision, context.attention, shape);
  AttentionCore core{causal_attention_flops(shape), times.forward_s, times.backward_s};
  const schemas::ModelConfig& model = *context.model;
  if (!model.sliding_window) return core;
  // Windowed and full layers alternate within a stage: each layer is priced at their mix, which
  // sums exactly over the model (and over a stage holding a whole number of periods).
  AttentionShape windowed = shape;
  windowed.window = static_cast<double>(model.sliding_window->size);
  const AttentionTime windowed_times =
      attention_time(kernel_gpu, context.precision, context.attention, windowed);
  const AttentionFlops windowed_flops = causal_attention_flops(windowed);
  const double share =
      static_cast<double>(model.sliding_window->windowed_layers(model.num_layers)) /
      static_cast<double>(model.num_layers);
  const auto mix = [share](double full, double window) {
    return (1 - share) * full + share * window;
  };
  return {{mix(core.flops.forward, windowed_flops.forward),
           mix(core.flops.backward, windowed_flops.backward)},
          mix(core.forward_s, windowed_times.forward_s),
          mix(core.backward_s, windowed_times.backward_s)};
}

// The memory-bound kernels of a layer (norms, residual adds, the activation, rotary, latent
// norms, quantising casts and what an unfused stack adds): their times and kernel counts.
struct ElementwiseCosts {
  UnfusedElementwise unfused;
  double activation_forward_s = 0;
  double activation_forward_kernels = 0, activation_backward_kernels = 0;
  double memory_forward_kernels = 0, memory_backward_kernels = 0;
  double forward_s = 0, backward_s = 0;
};

ElementwiseCosts elementwise_costs(const LayerShape& layer) {
  const LayerContext& context = layer.context;
  const schemas::ModelConfig& model = *context.model;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const LocalLayerDims& dims = layer.dims;
  const double element = layer.element;
  const double tokens = layer.tokens;
  const double norm_tokens = layer.norm_tokens;
  const double hidden = dims.hidden;
  // Bytes moved by the memory-bound kernels of the forward. The activation is priced on its own:
  // its tanh or sigmoid per element may bound it instead (elementwise_time_s), once forward and
  // once backward.
  const double mask_bytes = model.dropout > 0 ? 1.0 : 0.0;
  double memory_bytes = 2 * (2 * element) * norm_tokens * hidden;         // two norms
  memory_bytes += 2 * (3 * element + mask_bytes) * norm_tokens * hidden;  // bias-dropout-adds
  const double activation_bytes = (layer.swiglu ? 3.0 : 2.0) * element * tokens * dims.ffn;
  const double activation_evaluations = tokens * dims.ffn;
  if (layer.rope) {
    memory_bytes +=
        2 * element * tokens * (dims.heads + dims.kv_heads) * dims.head_dim;  // rotary on q, k
  }
  // Latent attention's norms of its q and kv latents.
  memory_bytes += 2 * element * tokens * dims.latent;
  ElementwiseCosts costs;
  // What an unfused stack runs beyond these kernels (framework_behaviour.h).
  costs.unfused = unfused_elementwise(context, dims, layer.shapes);
  const UnfusedElementwise& unfused = costs.unfused;
  memory_bytes += unfused.widened_forward_bytes;
  double memory_backward_bytes = 2 * memory_bytes;
  if (layer.fp8) {
    const QuantisingCastBytes casts = quantising_cast_bytes(context, layer.kind);
    memory_bytes += casts.forward;
    memory_backward_bytes += casts.backward;
  }
  // Their kernels: two norms, two residual adds (bias and dropout fused in), the activation,
  // rotary; the backward has about two for each; quantised GEMMs add the casts no norm fuses.
  const double elementwise_kernels =
      (layer.rope ? 6 : 5) - (layer.has_mlp ? 0 : 1) + (model.mla ? 2 : 0);
  // Dropout on both residual branches draws a keep decision per element in the forward and
  // again in the backward (the executor regenerates the mask rather than storing it).
  const double dropout_s =
      model.dropout > 0 ? random_number_time_s(gpu, 2 * norm_tokens * hidden) : 0.0;
  costs.activation_forward_s =
      layer.has_mlp ? elementwise_time_s(gpu, activation_bytes, activation_evaluations, 1) : 0.0;
  const double activation_backward_s =
      layer.has_mlp ? elementwise_time_s(gpu, 2 * activation_bytes, activation_evaluations, 2)
                    : 0.0;
  // The memory-bound kernels besides the activation (a layer without an MLP of its own has none),
  // and with it (what the host issues).
  costs.activation_forward_kernels = layer.has_mlp ? 1 : 0;
  costs.activation_backward_kernels = layer.has_mlp ? 2 : 0;
  costs.memory_forward_kernels =
      elementwise_kernels - costs.activation_forward_kernels + (layer.fp8 ? 2 : 0);
  costs.memory_backward_kernels =
      2 * (elementwise_kernels - costs.activation_forward_kernels) + (layer.fp8 ? 4 : 0);
  costs.forward_s = memory_bound_time_s(gpu, memory_bytes, costs.memory_forward_kernels) +
                    costs.activation_forward_s + dropout_s +
                    memory_bound_time_s(gpu, unfused.forward_bytes, unfused.forward_kernels);
  costs.backward_s =
      memory_bound_time_s(gpu, memory_backward_bytes, costs.memory_backward_kernels) +
      activation_backward_s + dropout_s +
      memory_bound_time_s(gpu, unfused.backward_input_bytes, unfused.backward_input_kernels);
  return costs;
}

// The tensor-parallel collectives of the blocks whose input sequence parallelism gathers and
// whose output it reduce-scatters: attention, and the MLP (a MoE layer's shared experts; its
// routed experts take their tokens by all-to-all, moe_block_costs.h).
struct TpTimes {
  double bytes = 0, forward_s = 0, backward_s = 0;
};

TpTimes tp_times(const LayerShape& layer) {
  const LayerContext& context = layer.context;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  TpTimes tp;
  tp.bytes = layer.tokens * layer.dims.hidden * layer.element;
  tp.forward_s = tp_layer_comm_s(context, tp.bytes, layer.has_mlp ? 2.0 : 1.0);
  tp.backward_s = tp.forward_s;
  if (!(context.tp_comm_overlap && context.sequence_parallel && context.tp > 1)) return tp;
  // Each collective beside the GEMMs it feeds or drains, in block order: the attention's
  // input GEMMs (fed), its output projection (drains), fc1 (fed), fc2 (drains).
  const auto paired = [&](const std::vector<double>& each_s) {
    const std::size_t fed = layer.attention.fed;
    std::vector<double> pairs{0.0, each_s[fed]};
    for (std::size_t i = 0; i < fed; ++i) pairs[0] += each_s[i];
    if (layer.has_mlp) {
      pairs.insert(pairs.end(), each_s.begin() + static_cast<long>(fed) + 1, each_s.end());
    }
    return pairs;
  };
  // The overlap runs each paired GEMM as tp chunks of its tokens, each chunk a GEMM of its own
  // (Transformer Engine's userbuffers): small chunks fill fewer waves of tiles, which the
  // overlap costs beyond the whole GEMM's time. Priced where the GPU's GEMMs are priced by
  // their tiles (gpu.gemm_tiles); a curve indexed by FLOPs, fitted to whole GEMMs, cannot tell
  // a chunk's lost waves from a small GEMM's and keeps the whole GEMM's time.
  const bool by_tiles = gpu.gemm_tiles && gpu.streaming_multiprocessors;
  const double chunks = by_tiles ? static_cast<double>(context.tp) : 1.0;
  std::vector<GemmShape> chunk_shapes = layer.shapes;
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
  tp.forward_s = overlapped_tp_comm_s(context, paired(scaled(chunked.forward_each_s)), tp.bytes) +
                 chunking_s(layer.gemms.forward_each_s, chunked.forward_each_s);
  tp.backward_s = overlapped_tp_comm_s(context, paired(scaled(chunked.input_each_s)), tp.bytes) +
                  chunking_s(layer.gemms.input_each_s, chunked.input_each_s);
  return tp;
}

// Context parallelism's keys and values: moved by the ring beside the attention, or gathered
// whole, with the copies and accumulations around them.
struct CpCosts {
  double forward_s = 0, backward_s = 0;
  double memory_forward_s = 0, memory_backward_s = 0;
  double forward_kernels = 0, backward_kernels = 0;
};

CpCosts cp_costs(const LayerShape& layer, const AttentionCore& attention) {
  const LayerContext& context = layer.context;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  CpCosts costs;
  if (context.cp <= 1) return costs;
  const double cp = static_cast<double>(context.cp);
  const double kv_bytes = layer.tokens * layer.dims.kv_heads *
                          (layer.dims.head_dim + layer.dims.value_dim) * layer.element;
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
  costs.memory_forward_s = memory_bound_time_s(gpu, extract_bytes);
  costs.memory_backward_s = memory_bound_time_s(gpu, backward_bytes, backward_kernels);
  costs.forward_kernels = 1;
  costs.backward_kernels = backward_kernels;
  if (!ring) {
    const double whole = cp * kv_bytes;
    const double gather_s =
        collective_time_s(*context.cluster, context.cp_span, Collective::all_gather, whole);
    costs.forward_s = gather_s;
    costs.backward_s = gather_s + collective_time_s(*context.cluster, context.cp_span,
                                                    Collective::reduce_scatter, whole);
    costs.forward_kernels += 1;
    costs.backward_kernels += 2;
    return costs;
  }
  // Each of the cp − 1 hops runs beside the attention of the block in hand, but only by the
  // communicator's progress share while the rank computes (Open MPI without a progress
  // thread moves a message inside MPI calls only: the rest waits for the rank's wait); NCCL
  // and every preset: all of it. The backward's key/value gradients travel one hop more:
  // the sum of the last step arrives after the rank's last compute, with nothing to hide it.
  const double progress = context.cluster->communicator_progress_during_compute.value_or(1.0);
  const double steps = cp - 1;
  // A send and a receive per hop; the backward's last hop adds a pair.
  costs.forward_kernels += 2 * steps;
  costs.backward_kernels += 2 * steps + 2;
  const auto exposed = [&](double transfer_s, double compute_s) {
    return std::max(0.0, progress * transfer_s - compute_s) + (1 - progress) * transfer_s;
  };
  costs.forward_s =
      exposed(steps * point_to_point_time_s(*context.cluster, context.cp_tier, kv_bytes),
              attention.forward_s);
  costs.backward_s =
      exposed(steps * point_to_point_time_s(*context.cluster, context.cp_tier, 2 * kv_bytes),
              attention.backward_s) +
      point_to_point_time_s(*context.cluster, context.cp_tier, kv_bytes);
  return costs;
}

// The blocks replayed from CUDA graphs (schemas::CudaGraphScope), with the kernels counted
// above: attention's GEMMs, core, its norm, residual add, rotary, latent norms, fp8 cast and tp
// collectives; a dense MLP's two GEMMs, activation, norm, residual add, fp8 cast and
// collectives; each backward mirrors its forward's element-wise kernels twice.
void capture_graphed_blocks(const LayerShape& layer, const AttentionKernels& attention_count,
                            const ElementwiseCosts& elementwise, double block_collectives,
                            const std::optional<MoeBlockCosts>& expert_costs, PassCosts& costs) {
  using schemas::CudaGraphScope;
  const LayerContext& context = layer.context;
  const double cast = layer.fp8 ? 1.0 : 0.0;
  if (context.graphed(CudaGraphScope::attn)) {
    const double attention_gemms = static_cast<double>(layer.attention.shapes.size());
    const double elementwise_kernels = 2 + (layer.rope ? 1 : 0) + (context.model->mla ? 2 : 0);
    costs.forward.capture(attention_gemms + attention_count.forward + elementwise_kernels + cast +
                          block_collectives);
    costs.backward_input.capture(attention_gemms + attention_count.backward +
                                 2 * elementwise_kernels + 2 * cast + block_collectives);
    costs.backward_weight.capture(attention_gemms);
  }
  if (context.graphed(CudaGraphScope::mlp) && layer.kind == LayerKind::dense && layer.has_mlp) {
    costs.forward.capture(2 + elementwise.activation_forward_kernels + 2 + cast +
                          block_collectives);
    costs.backward_input.capture(2 + elementwise.activation_backward_kernels + 2 * 2 + 2 * cast +
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

// Selective recomputation: each module the plan names runs its forward again before the layer's
// backward.
void add_recomputed_modules(const LayerShape& layer, const AttentionCore& attention,
                            const AttentionKernels& attention_count,
                            const ElementwiseCosts& elementwise, const TpTimes& tp,
                            double block_collectives,
                            const std::optional<MoeBlockCosts>& expert_costs, PassCosts& costs) {
  using schemas::RecomputeModule;
  const LayerContext& context = layer.context;
  const schemas::ModelConfig& model = *context.model;
  const auto gemm_flops = [](const GemmShape& shape) { return 2 * shape.m * shape.n * shape.k; };
  if (context.recomputes(RecomputeModule::core_attn)) {
    costs.recompute.compute_s += attention.forward_s;
    costs.recompute.kernels += attention_count.forward;
    costs.recompute_flops += attention.flops.forward;
  }
  if (context.recomputes(RecomputeModule::mla_up_proj) && model.mla) {
    // The up projections: the queries' (with a query latent) and the keys' and values'.
    std::vector<std::size_t> up{layer.attention.fed - 1};
    if (model.mla->q_lora_rank > 0) up.push_back(1);
    for (std::size_t i : up) {
      costs.recompute.compute_s += layer.gemms.forward_each_s[i];
      costs.recompute.kernels += 1;
      costs.recompute_flops += gemm_flops(layer.shapes[i]);
    }
  }
  if (context.recomputes(RecomputeModule::mlp) && layer.kind == LayerKind::dense && layer.has_mlp) {
    // fc1, the activation and fc2 from the MLP's input, with the block's tp collectives.
    const std::size_t fc1 = layer.shapes.size() - 2;
    costs.recompute.compute_s += layer.gemms.forward_each_s[fc1] +
                                 layer.gemms.forward_each_s[fc1 + 1] +
                                 elementwise.activation_forward_s;
    costs.recompute.tp_comm_s += tp_layer_comm_s(context, tp.bytes, 1.0);
    costs.recompute.kernels += 3 + block_collectives;
    costs.recompute_flops += gemm_flops(layer.shapes[fc1]) + gemm_flops(layer.shapes[fc1 + 1]);
  }
  if (expert_costs) {
    if (context.recomputes(RecomputeModule::layernorm)) {
      // The pre-MLP norm, a module of its own before the router (read and write the tokens).
      costs.recompute.compute_s += memory_bound_time_s(
          context.cluster->gpu, 2 * layer.element * layer.norm_tokens * layer.dims.hidden);
      costs.recompute.kernels += 1;
    }
    if (context.recomputes(RecomputeModule::moe_act)) {
      costs.recompute.compute_s += expert_costs->activation_forward.compute_s;
      costs.recompute.kernels += expert_costs->activation_forward.kernels;
    }
  }
}

// A MoE layer's routed experts, added to the layer's passes; under ep_comm_overlap their
// all-to-alls run beside the other micro-batch's compute of the same size: only what outlasts it
// shows, plus the compute's slowdown while they share the GPU.
void add_routed_experts(const LayerContext& context, const MoeBlockCosts& experts,
                        PassCosts& costs) {
  costs.forward += experts.forward;
  costs.backward_input += experts.backward_input;
  costs.backward_weight += experts.backward_weight;
  costs.forward_flops += experts.forward_flops;
  if (!context.ep_comm_overlap) return;
  costs.forward.ep_comm_s =
      beside_compute_s(context, experts.forward.ep_comm_s, costs.forward.compute_s);
  costs.backward_input.ep_comm_s =
      beside_compute_s(context, experts.backward_input.ep_comm_s,
                       costs.backward_input.compute_s + costs.backward_weight.compute_s);
}

}  // namespace

PassCosts transformer_layer_costs(const LayerContext& context, RecomputeGranularity recompute,
                                  LayerKind kind) {
  const schemas::ModelConfig& model = *context.model;
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const LayerShape layer = layer_shape(context, kind);
  const AttentionCore attention = attention_core(layer);
  const ElementwiseCosts elementwise = elementwise_costs(layer);
  const TpTimes tp = tp_times(layer);
  const CpCosts cp = cp_costs(layer, attention);
  const UnfusedElementwise& unfused = elementwise.unfused;

  PassCosts costs;
  costs.forward = {
      layer.gemms.forward_s + attention.forward_s + elementwise.forward_s + cp.memory_forward_s,
      tp.forward_s, cp.forward_s};
  costs.backward_input = {
      layer.gemms.input_s + attention.backward_s + elementwise.backward_s + cp.memory_backward_s,
      tp.backward_s, cp.backward_s};
  costs.backward_weight = {
      layer.gemms.weight_s +
          memory_bound_time_s(gpu, unfused.backward_weight_bytes, unfused.backward_weight_kernels),
      0, 0};
  costs.forward_flops = layer.gemms.forward_flops + attention.flops.forward;
  // The kernels each pass issues: its GEMMs, attention's, the memory-bound ones priced above and
  // the collectives (tp: one all-reduce per block, or an all-gather and a reduce-scatter).
  const double gemm_kernels = static_cast<double>(layer.shapes.size());
  const AttentionKernels attention_count = attention_kernels(context.attention, model.dropout > 0);
  const double block_collectives = context.tp > 1 ? (context.sequence_parallel ? 2.0 : 1.0) : 0.0;
  const double tp_collectives = (layer.has_mlp ? 2.0 : 1.0) * block_collectives;
  costs.forward.kernels = gemm_kernels + attention_count.forward +
                          elementwise.memory_forward_kernels +
                          elementwise.activation_forward_kernels + tp_collectives +
                          cp.forward_kernels + unfused.forward_kernels;
  costs.backward_input.kernels = gemm_kernels + attention_count.backward +
                                 elementwise.memory_backward_kernels +
                                 elementwise.activation_backward_kernels + tp_collectives +
                                 cp.backward_kernels + unfused.backward_input_kernels;
  costs.backward_weight.kernels = gemm_kernels + unfused.backward_weight_kernels;
  std::optional<MoeBlockCosts> expert_costs;
  if (kind == LayerKind::moe) {
    expert_costs = moe_block_costs(context);
    add_routed_experts(context, *expert_costs, costs);
  }
  capture_graphed_blocks(layer, attention_count, elementwise, block_collectives, expert_costs,
                         costs);
  if (recompute == RecomputeGranularity::full) {
    costs.recompute = costs.forward;
    costs.recompute_flops = costs.forward_flops;
  } else if (recompute == RecomputeGranularity::selective) {
    add_recomputed_modules(layer, attention, attention_count, elementwise, tp, block_collectives,
                           expert_costs, costs);
  }
  if (context.zero3_layer_gathers) {
    // The next layer's gather runs during this layer's forward; in the backward, the previous
    // layer's gather and this layer's reduce-scatter run during this layer's backward (with its
    // recomputation). A recomputed forward uses the parameters gathered for the backward.
    const detail::Zero3Collectives collectives = detail::zero3_collectives(context, kind);
    costs.forward.dp_comm_s =
        beside_compute_s(context, collectives.gather_s, costs.forward.compute_s);
    costs.backward_input.dp_comm_s =
        beside_compute_s(context, collectives.gather_s + collectives.scatter_s,
                         costs.recompute.compute_s + costs.backward_input.compute_s +
                             costs.backward_weight.compute_s);
    costs.forward.kernels += 1;
    costs.backward_input.kernels += 2;
  }
  detail::charge_host_issue(context, costs);
  return costs;
}

}  // namespace strata::costmodels
