// Plan: the plan file format (kind "plan") — how one model is laid out on one cluster: the mesh,
// batch, pipeline stages, schedule, ZeRO, recomputation and precision, with the model and the
// cluster embedded so that a plan is self-contained. Written by the planner, read by the
// simulator and the executor.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/cuda_graph_scope.h"
#include "strata/schemas/dtype.h"
#include "strata/schemas/enum_names.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/object_reader.h"
#include "strata/schemas/training_framework.h"

namespace strata::schemas {

inline constexpr int kPlanSchemaVersion = 1;

enum class MeshAxis { tp, cp, dp, pp };
inline constexpr std::array<EnumName<MeshAxis>, 4> kMeshAxisNames{
    {{MeshAxis::tp, "tp"}, {MeshAxis::cp, "cp"}, {MeshAxis::dp, "dp"}, {MeshAxis::pp, "pp"}}};

// Mesh sizes and the order in which the axes are laid onto ranks, fastest-varying first, as
// Megatron-LM's RankGenerator reads its order string. With "tp-cp-dp-pp" on 8-GPU nodes and
// tp=8, each tp group is one node:
//
//   rank = tp_index + tp·(cp_index + cp·(dp_index + dp·pp_index))
//
//   node 0: ranks 0..7   = tp group (dp 0, pp 0)
//   node 1: ranks 8..15  = tp group (dp 1, pp 0)   dp groups stride 8, pp groups stride 8·dp
struct Mesh {
  std::int64_t tp = 1;
  std::int64_t cp = 1;
  std::int64_t dp = 1;
  std::int64_t pp = 1;
  std::int64_t vpp = 1;  // model chunks per pipeline rank (interleaved 1F1B)
  std::array<MeshAxis, 4> order{MeshAxis::tp, MeshAxis::cp, MeshAxis::dp, MeshAxis::pp};
  // Hybrid sharding (HSDP; FSDP2's shard × replicate, Megatron's distributed-optimizer
  // instances): ZeRO shards model state over blocks of dp_shard consecutive dp ranks (times cp)
  // and replicates it across the dp / dp_shard blocks. 0: over all of dp (full sharding).
  std::int64_t dp_shard = 0;
  // Mixture-of-experts layers fold a second mesh over the same ranks (Megatron-Core's parallel
  // folding): within each pipeline stage the tp·cp·dp ranks are read, in their order, as
  // etp × ep × edp — experts split ep ways, each expert's MLP etp ways, and edp =
  // tp·cp·dp / (ep·etp) replicas of each expert shard (schemas/mesh_ranks.h). 1 and 1 for dense
  // models.
  std::int64_t ep = 1;
  std::int64_t etp = 1;

  std::int64_t world_size() const { return tp * cp * dp * pp; }
  // The expert data-parallel size: ranks of a stage holding the same expert shard.
  std::int64_t expert_dp() const { return tp * cp * dp / (ep * etp); }
  // ZeRO's shards of the expert state: edp split into the same replicas as the dense state.
  std::int64_t expert_zero_shards() const { return expert_dp() / zero_replicas(); }
  // dp ranks a ZeRO shard group spans, and the replicas of each shard across dp.
  std::int64_t zero_shard_dp() const { return dp_shard > 0 ? dp_shard : dp; }
  std::int64_t zero_replicas() const { return dp / zero_shard_dp(); }
  std::int64_t size_of(MeshAxis axis) const;
  bool operator==(const Mesh&) const = default;
};
std::string mesh_order_to_string(const std::array<MeshAxis, 4>& order);

// Strata's limits on a plan (README "Limits"): far above any published run, they bound the work
// of every command that reads one. A step of more micro-batches than the simulator runs in full
// is predicted from two shorter ones (simulator/plan_simulation.h).
inline constexpr std::int64_t kMaxMeshAxisSize = kMaxNodes * kMaxGpusPerNode;      // 2^26 GPUs
inline constexpr std::int64_t kMaxGlobalBatchSize = std::int64_t{1} << 24;         // sequences
inline constexpr std::int64_t kMaxGradientBucketElements = std::int64_t{1} << 40;  // parameters
// Pipeline stages (pp × vpp). Simulating a step runs every stage past the pipeline's warm-up —
// at least 8 × pp × vpp micro-batches on each stage — so its work and memory grow with the
// square of the stages (simulator/plan_simulation.h); 512 stages keep them to a few seconds and
// half a gigabyte, and are four times the deepest pipeline of any published run (pp 16 × vpp 8).
inline constexpr std::int64_t kMaxPipelineStages = 512;

struct BatchConfig {
  std::int64_t seq_length = 0;
  std::int64_t micro_batch_size = 1;   // sequences per micro-batch per dp rank
  std::int64_t global_batch_size = 1;  // sequences per optimizer step, over all dp ranks
  std::int64_t num_micro_batches = 1;  // = global / (micro × dp), per pipeline per step
  bool operator==(const BatchConfig&) const = default;
};

enum class RecomputeGranularity { none, selective, full };
inline constexpr std::array<EnumName<RecomputeGranularity>, 3> kRecomputeGranularityNames{
    {{RecomputeGranularity::none, "none"},
     {RecomputeGranularity::selective, "selective"},
     {RecomputeGranularity::full, "full"}}};

// What "selective" recomputes: Megatron-Core's --recompute-modules. Each named part of a layer
// keeps no activations of its own and runs its forward again in the backward. core_attn: the
// attention core (QKᵀ, softmax, PV); layernorm: the norms that are modules of their own (a MoE
// layer's pre-MLP norm; Transformer Engine fuses the others into the GEMM after them); mlp: a
// dense layer's whole MLP from its input; moe_act: the routed experts' activation; mla_up_proj:
// latent attention's up projections (queries, keys and values from their latents).
enum class RecomputeModule { core_attn, layernorm, mlp, moe_act, mla_up_proj };
inline constexpr std::array<EnumName<RecomputeModule>, 5> kRecomputeModuleNames{
    {{RecomputeModule::core_attn, "core_attn"},
     {RecomputeModule::layernorm, "layernorm"},
     {RecomputeModule::mlp, "mlp"},
     {RecomputeModule::moe_act, "moe_act"},
     {RecomputeModule::mla_up_proj, "mla_up_proj"}}};

struct RecomputeConfig {
  RecomputeGranularity granularity = RecomputeGranularity::none;
  // With "full": how many layers of each stage (in stage order) are recomputed whole; empty means
  // all of them. The rest keep their activations, as Megatron's --recompute-num-layers does.
  std::vector<std::int64_t> full_layers_per_stage;
  // With "selective": the modules recomputed; empty means Megatron-Core's default, core_attn.
  std::vector<RecomputeModule> modules;
  bool operator==(const RecomputeConfig&) const = default;
};

// Whether `recompute` recomputes `module` of each layer (selective granularity only: full
// recomputes whole layers, whatever their modules).
bool recomputes_module(const RecomputeConfig& recompute, RecomputeModule module);

// How attention's core (QKᵀ, softmax, PV) runs: one fused kernel that never stores the s×s
// scores (flash attention, the norm since 2023), or separate kernels over the whole score matrix
// (Megatron-LM before 2023: baddbmm, fused scale-mask-softmax, dropout, bmm).
enum class AttentionKernel { flash, unfused };
inline constexpr std::array<EnumName<AttentionKernel>, 2> kAttentionKernelNames{
    {{AttentionKernel::flash, "flash"}, {AttentionKernel::unfused, "unfused"}}};

// How context parallelism's attention meets the other cp ranks' keys and values: passed around a
// ring one block at a time while the block in hand is attended to (Ring Attention; Megatron-Core's
// --cp-comm-type p2p), or all-gathered once before the attention and their gradients
// reduce-scattered after it (Llama 3's choice; --cp-comm-type allgather): fewer, larger messages
// and no overlap.
enum class ContextParallelComm { ring, all_gather };
inline constexpr std::array<EnumName<ContextParallelComm>, 2> kContextParallelCommNames{
    {{ContextParallelComm::ring, "ring"}, {ContextParallelComm::all_gather, "all_gather"}}};

enum class ScheduleType { gpipe, one_f_one_b, interleaved_one_f_one_b, zb_h1, custom };
inline constexpr std::array<EnumName<ScheduleType>, 5> kScheduleTypeNames{
    {{ScheduleType::gpipe, "gpipe"},
     {ScheduleType::one_f_one_b, "1f1b"},
     {ScheduleType::interleaved_one_f_one_b, "interleaved-1f1b"},
     {ScheduleType::zb_h1, "zb-h1"},
     {ScheduleType::custom, "custom"}}};

struct ScheduleConfig {
  ScheduleType type = ScheduleType::one_f_one_b;
  std::string file;  // custom only: per-rank action CSV, relative to the plan file
  bool operator==(const ScheduleConfig&) const = default;
};

// One pipeline stage = one model chunk on one pipeline rank. Stages are listed in the order
// activations flow through them; with vpp > 1, stage s runs on pipeline rank s mod pp as its
// chunk s / pp. Each holds a contiguous range of transformer layers; the first stage also holds
// the embedding and the last the LM head and loss. A stage may hold only the embedding
// (Megatron's standalone embedding stage) or only the LM head.
struct PipelineStage {
  std::int64_t first_layer = 0;
  std::int64_t num_layers = 0;
  bool embedding = false;
  bool lm_head = false;
  bool operator==(const PipelineStage&) const = default;
};

// What a tool predicted for this plan (absent when nothing has predicted it yet).
struct PredictedMetrics {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;  // model FLOPs utilisation: useful FLOPs / (time × GPUs × peak)
  std::vector<std::int64_t> peak_memory_bytes_per_pipeline_rank;
  std::optional<std::string> tool;
  bool operator==(const PredictedMetrics&) const = default;
};

struct Plan {
  std::optional<std::string> description;
  ModelConfig model;
  ClusterConfig cluster;
  Mesh mesh;
  BatchConfig batch;
  bool sequence_parallel = false;
  std::int64_t zero_stage = 0;
  // Data-parallel gradient reduction bucket by bucket during each stage's last backward
  // (Megatron-Core's --overlap-grad-reduce), or after the whole backward, as Megatron-LM does by
  // default and DeepSpeed's pipeline engine always does.
  bool overlap_grad_reduce = true;
  // Parameters per data-parallel gradient bucket (Megatron-LM's --ddp-bucket-size); absent:
  // Megatron's default max(40M, 1M·dp·cp). What the simulator prices and the executor reduces
  // (gradient_buckets.h).
  std::optional<std::int64_t> gradient_bucket_elements;
  // Tensor-parallel all-gathers and reduce-scatters pipelined with the GEMMs they feed or drain
  // (Megatron-Core / Transformer Engine --tp-comm-overlap, userbuffers). Needs sequence
  // parallelism, as Megatron requires.
  bool tp_comm_overlap = false;
  // The training stack that runs the plan, for what differs between stacks
  // (costmodels/framework_behaviour.h).
  TrainingFramework framework = TrainingFramework::strata;
  AttentionKernel attention = AttentionKernel::flash;
  ContextParallelComm cp_comm = ContextParallelComm::ring;  // with cp > 1
  // Mixture of experts: tokens of the busiest expert over the mean of a micro-batch (what the
  // slowest expert rank computes and receives). Absent: the cost models' default
  // (costmodels/moe_block_costs.h).
  std::optional<double> expert_load_imbalance;
  // Mixture of experts: each MoE layer's token all-to-alls run beside another micro-batch's
  // compute (Megatron-Core's --overlap-moe-expert-parallel-comm with --delay-wgrad-compute,
  // DeepSeek's dual-micro-batch overlap) instead of on the critical path.
  bool ep_comm_overlap = false;
  // The parts of the step replayed from CUDA graphs (cuda_graph_scope.h); empty: none.
  std::vector<CudaGraphScope> cuda_graph_scope;
  RecomputeConfig recompute;
  ScheduleConfig schedule;
  std::vector<PipelineStage> stages;
  Dtype precision = Dtype::bf16;
  // What gradients are accumulated and reduced in; absent: the precision's default
  // (default_gradient_dtype, dtype.h). Use gradient_dtype_of(plan).
  std::optional<Dtype> gradient_dtype;
  std::optional<PredictedMetrics> predicted;

  bool operator==(const Plan&) const = default;
};

// The plan's gradient dtype, its precision's default where it names none.
inline Dtype gradient_dtype_of(const Plan& plan) {
  return plan.gradient_dtype.value_or(default_gradient_dtype(plan.precision));
}

// Splits num_layers into `num_stages` contiguous ranges as evenly as possible (earlier stages get
// the extra layers), with the embedding on the first stage and the LM head on the last.
// With `embedding_as_layer` and `loss_as_layer` the embedding and the LM head with its loss each
// take a layer's slot in the split, as Megatron-LM's --account-for-embedding-in-pipeline-split and
// --account-for-loss-in-pipeline-split do: num_layers + 2 slots split evenly, so the first and last
// stages hold one layer fewer (none, where a stage has one slot).
std::vector<PipelineStage> even_pipeline_stages(std::int64_t num_layers, std::int64_t num_stages,
                                                bool embedding_as_layer = false,
                                                bool loss_as_layer = false);

// "fnv1a64:<16 hex digits>" of the canonical JSON of the embedded model and cluster. A plan whose
// stored hash differs was edited after it was made.
std::string plan_content_hash(const ModelConfig& model, const ClusterConfig& cluster);

Plan parse_plan(const nlohmann::json& document, const JsonLocation& location);
nlohmann::json plan_to_json(const Plan& plan);  // includes content_hash
// Every rule between the plan's fields and its model and cluster (see README "plan" rules).
void validate_plan(const Plan& plan, const JsonLocation& location);
// A mesh object's "order" ("tp-cp-dp-pp": each axis once, fastest-varying first), as plans and
// checkpoints' layouts write it.
std::array<MeshAxis, 4> parse_mesh_order(const ObjectReader& reader);
// The parts of those rules that a checkpoint's recorded layout must meet as well: the mesh against
// the model (tp against the heads and the MLP, pp against the layers; `mesh_location` is the mesh
// object's), and the pipeline stages covering the layers once with the embedding first and the LM
// head last (`stages_location` is the stage list's; the stages are mesh.pp × mesh.vpp).
void validate_mesh_for_model(const Mesh& mesh, const ModelConfig& model,
                             const JsonLocation& mesh_location);
void validate_pipeline_stages(const std::vector<PipelineStage>& stages, const Mesh& mesh,
                              std::int64_t num_layers, const JsonLocation& stages_location);

}  // namespace strata::schemas
