// Time of one transformer layer, of the embedding and of the LM head + loss, per micro-batch on
// one rank, split the way pipeline schedules need it: forward, backward-input (the gradient sent
// upstream), backward-weight (deferred by zero-bubble schedules) and recompute.
//
// Per layer, with T = micro_batch·seq/cp local tokens, t = tp, h_r = heads/t, kv_r = ⌈kv/t⌉:
//   GEMMs (forward)  QKV [T × (h_r+2kv_r)d × h], out-proj [T × h × h_r·d],
//                    fc1 [T × g·f/t × h] (g = 2 for SwiGLU), fc2 [T × h × f/t];
//                    backward-input and backward-weight repeat each with permuted shapes.
//   attention        causal flash attention (kernel_time.h), all in backward-input.
//   memory-bound     two norms, two bias-dropout-adds, the activation, rotary — on T/t tokens
//                    for the norms and adds under sequence parallelism; backward moves twice the
//                    forward's bytes. A stack that runs some of it unfused, or under
//                    torch.autocast, adds those kernels and bytes (unfused_elementwise.h).
//   tp communication two all-reduces of T·h activations forward and two backward (or an
//                    all-gather + reduce-scatter pair each under sequence parallelism), on the
//                    critical path as in Megatron-LM; with tp_comm_overlap (sequence parallel
//                    only) each is pipelined in tp chunks with the GEMM it feeds or drains,
//                    and only what the GEMM does not cover shows.
//   cp communication ring (cp_comm ring): K,V (forward) and K,V,dK,dV (backward) pass cp−1
//                    times around the cp ring, hidden behind the attention kernels; only the
//                    excess shows. All-gather (cp_comm all_gather): the forward all-gathers the
//                    cp·K,V of the whole sequence, the backward gathers them again and
//                    reduce-scatters their gradients, none of it overlapped.
//   recompute        full: the whole forward again; selective: the forward of each module the plan
//                    names (schemas::RecomputeModule; by default the attention core).
//   host issue       every kernel and collective above is counted (PassTime::kernels); a stack
//                    that issues them eagerly from Python (framework_behaviour.h) spends the
//                    cluster's eager_issue_us_per_kernel of host time on each, and a pass lasts
//                    the longer of its device time and that issue time: small layers at small
//                    micro-batches (and large tp) wait for the host, not for the GPU. Kernels
//                    the plan replays from CUDA graphs (its cuda_graph_scope: a layer's attention
//                    or MLP block, a MoE layer's router, preprocessing or whole block) cost one
//                    issue per graph instead; a whole-iteration graph leaves nothing to issue.
//
// Latent attention (MLA) replaces QKV by its down projections (whole on every tp rank, on the
// gathered tokens) and up projections (split over tp), with query/key heads of qk_head_dim and
// values of v_head_dim. A mixture-of-experts layer replaces the dense MLP by the router, the
// routed experts and their token dispatch (moe_block_costs.h), and its shared experts, which run
// as a dense MLP of their width with the dense MLP's tp collectives.

#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/mesh_placement.h"
#include "strata/schemas/plan.h"

namespace strata::costmodels {

struct PassTime {
  double compute_s = 0;  // GEMMs, attention and memory-bound kernels
  double tp_comm_s = 0;
  double cp_comm_s = 0;  // the part ring attention does not hide
  double dp_comm_s = 0;  // per-layer ZeRO-3 gathers and reduce-scatters the compute does not hide
  double ep_comm_s = 0;  // token dispatch and combine of MoE layers (all-to-all, etp gathers)
  double kernels = 0;    // kernels and collectives the pass issues
  double graphed_kernels = 0;  // of those, the ones replayed from CUDA graphs
  double graphs = 0;           // the CUDA graphs it launches
  double host_issue_s = 0;     // the host's time to issue them (eager stacks only, else 0)
  // The device's time: kernels and the collectives they wait for.
  double device_s() const { return compute_s + tp_comm_s + cp_comm_s + dp_comm_s + ep_comm_s; }
  // The host issues a pass's kernels while the device runs the ones already issued, so a pass
  // takes the longer of the two.
  double total_s() const { return std::max(device_s(), host_issue_s); }
  // `count` of the pass's kernels replayed from one CUDA graph.
  void capture(double count) {
    graphed_kernels += std::min(count, kernels - graphed_kernels);
    graphs += 1;
  }
  // What the device waits for the host beyond its own work.
  double host_wait_s() const { return total_s() - device_s(); }
  PassTime& operator+=(const PassTime& other);
  PassTime scaled(double factor) const;
};

struct PassCosts {
  PassTime forward;
  PassTime backward_input;
  PassTime backward_weight;
  PassTime recompute;          // run before backward-input when recomputation is on
  double forward_flops = 0;    // model FLOPs of the forward (what MFU counts)
  double recompute_flops = 0;  // hardware FLOPs added by recomputation
  PassCosts& operator+=(const PassCosts& other);
  PassCosts scaled(double factor) const;
  // Everything a backward runs: recompute, input and weight gradients.
  double backward_s() const {
    return recompute.total_s() + backward_input.total_s() + backward_weight.total_s();
  }
  // One micro-batch through forward and backward.
  double forward_backward_s() const { return forward.total_s() + backward_s(); }
};

// What a plan fixes for every layer: the model, the GPU, the shape of the work per rank and the
// network spans of its tp and cp groups. It points into the plan (model, cluster): keep the plan
// alive while the context is used.
struct LayerContext {
  const schemas::ModelConfig* model = nullptr;
  const schemas::ClusterConfig* cluster = nullptr;
  schemas::Dtype precision = schemas::Dtype::bf16;
  // What weight gradients accumulate in (a plan's gradient_dtype; absent: the precision's
  // default). Use gradient_dtype_of().
  std::optional<schemas::Dtype> gradient_dtype;
  std::int64_t tp = 1;
  std::int64_t cp = 1;
  bool sequence_parallel = false;
  std::int64_t micro_batch_size = 1;
  std::int64_t seq_length = 0;
  schemas::RecomputeGranularity recompute = schemas::RecomputeGranularity::none;
  // What a selectively recomputed layer recomputes, bit i for schemas::RecomputeModule i (a
  // plan's recompute.modules; Megatron-Core's default, the attention core, otherwise). Use
  // recomputes().
  unsigned recompute_modules = 1u << static_cast<unsigned>(schemas::RecomputeModule::core_attn);
  bool tp_comm_overlap = false;  // with sequence parallelism: collectives pipelined with GEMMs
  // The plan's cuda_graph_scope, bit i for schemas::CudaGraphScope i. Use graphed().
  unsigned cuda_graph_scopes = 0;
  schemas::AttentionKernel attention = schemas::AttentionKernel::flash;
  // ZeRO-3 layer by layer (costmodels/framework_behaviour.h): each layer gathers its parameters
  // over the dp·cp group in forward and backward and reduce-scatters its gradients, overlapped with
  // the compute of its neighbour.
  bool zero3_layer_gathers = false;
  // Activations in Strata's executor's buffers (costmodels/framework_behaviour.h;
  // activation_memory.h).
  bool executor_activation_buffers = false;
  // The loss's gradient overwrites the logits (costmodels/framework_behaviour.h).
  bool loss_gradient_in_logits = false;
  // The element-wise work of an unfused stack (framework_behaviour.h; unfused_elementwise.h).
  bool autocast_over_fp32_parameters = false;
  bool bias_gradients_in_own_kernels = false;
  bool unfused_elementwise = false;
  // Set only with zero3_layer_gathers: the ZeRO shard group (the dp·cp group without hybrid
  // sharding) and, under hybrid sharding, the replicas each reduced shard is all-reduced over.
  GroupSpan dp_span;
  std::optional<GroupSpan> replica_span;
  double zero_shards = 1;  // ranks of the shard group
  // With zero3_layer_gathers and experts: the routed experts' shard group (the expert
  // data-parallel group, or its blocks under hybrid sharding) and its size.
  GroupSpan expert_zero_span;
  double expert_zero_shards = 1;
  GroupSpan tp_span;
  schemas::ContextParallelComm cp_comm = schemas::ContextParallelComm::ring;
  int cp_tier = 0;    // with cp > 1: the tier ring attention's neighbours talk over
  GroupSpan cp_span;  // with cp > 1: the cp group, which the all-gather variant gathers over
  // Mixture of experts (a model with a moe block): the expert mesh (schemas/mesh_ranks.h), where
  // the ep group (the all-to-all's) and the etp group sit, and the tokens of the busiest expert
  // over the mean (1: balanced).
  std::int64_t ep = 1;
  std::int64_t etp = 1;
  GroupSpan ep_span;
  GroupSpan etp_span;
  double expert_load_imbalance = 1.0;
  bool ep_comm_overlap = false;  // the exchanges run beside another micro-batch's compute
  // Host seconds to issue one kernel (the cluster's eager_issue_us_per_kernel where the plan's
  // stack issues eagerly; 0: the host never bounds a pass).
  double eager_issue_s_per_kernel = 0;

  bool graphed(schemas::CudaGraphScope scope) const {
    return (cuda_graph_scopes >> static_cast<unsigned>(scope) & 1u) != 0;
  }
  bool recomputes(schemas::RecomputeModule module) const {
    return (recompute_modules >> static_cast<unsigned>(module) & 1u) != 0;
  }
  schemas::Dtype gradient_dtype_of() const {
    return gradient_dtype.value_or(schemas::default_gradient_dtype(precision));
  }
  double local_tokens() const;      // micro_batch · seq / cp
  double norm_tokens() const;       // local tokens, divided by tp under sequence parallelism
  double activation_bytes() const;  // bytes per activation element: 4 in fp32, else 2

  // Every field, in order (the model and cluster by address): see layer_cost_key.
  auto operator<=>(const LayerContext&) const = default;
  bool operator==(const LayerContext&) const = default;
};

// `context` with the groups its settings leave unread cleared (the cp group under ring
// attention, whose neighbours talk over cp_tier alone): two contexts with equal keys cost the
// same, in every function here and in layer_cost_set, so a caller that prices many (the
// planner) caches by it. A field added to LayerContext is in the key without more ado.
LayerContext layer_cost_key(LayerContext context);
// Whether `context` is its own key (layer_cost_key would clear nothing).
bool is_layer_cost_key(const LayerContext& context);
// A hash of a key for unordered caches: it reads the fields a search varies (the mesh's sizes,
// the micro-batch, recomputation, sequence parallelism, the cp exchange, ZeRO-3's gathers and the
// groups' sizes and outermost tiers); equality reads every field, so a field the hash leaves out
// costs collisions, never a wrong answer.
struct LayerCostKeyHash {
  std::size_t operator()(const LayerContext& key) const;
};

// The context of a plan's layers; `placement`, when given, must be
// mesh_placement(plan.cluster, plan.mesh, plan.model) (the planner keeps one per mesh).
LayerContext layer_context(const schemas::Plan& plan, const MeshPlacement* placement = nullptr);

// One layer's sizes as a rank of the tp group holds them: the hidden size and head dimension
// whole, the query heads and the MLP's width split over tp, the kv heads split or replicated
// (⌈kv/tp⌉), and the MLP's gate count (2 for SwiGLU's gate and up projections, else 1).
// head_dim is the query/key width per head and value_dim the value's (equal but for latent
// attention); latent is latent attention's per-token width computed whole on every tp rank
// (q_lora_rank + kv_lora_rank + qk_rope_head_dim; 0 without it). ffn is the MLP a layer of
// `kind` runs split over tp: the dense MLP, or a MoE layer's shared experts (0 without any).
enum class LayerKind { dense, moe };
struct LocalLayerDims {
  double hidden = 0;
  double head_dim = 0;
  double heads = 0;
  double kv_heads = 0;
  double ffn = 0;
  double gate = 1;
  double value_dim = 0;
  double latent = 0;
};
LocalLayerDims local_layer_dims(const LayerContext& context, LayerKind kind = LayerKind::dense);

// One transformer layer; `recompute` chooses whether this layer is recomputed (a plan may
// recompute only some layers of a stage fully).
PassCosts transformer_layer_costs(const LayerContext& context,
                                  schemas::RecomputeGranularity recompute,
                                  LayerKind kind = LayerKind::dense);
PassCosts embedding_costs(const LayerContext& context);
PassCosts lm_head_costs(const LayerContext& context);  // final norm, LM head GEMM, cross-entropy
// What an MTP module adds before its transformer layer: the shared embedding's lookup, the two
// norms and the eh_proj GEMM (its layer and its pass through the shared head are priced as the
// model's own layer and lm_head_costs).
PassCosts mtp_input_costs(const LayerContext& context);

}  // namespace strata::costmodels
