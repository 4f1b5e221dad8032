// Everything the simulator needs to know about a plan's costs, computed once per plan: per
// virtual pipeline stage its pass times, activation bytes, parameters, point-to-point and
// data-parallel communication; per pipeline rank its model-state memory and optimizer step.
//
// Model states per rank (P parameters on the rank, D = dp·cp ranks sharing them, w/g/o the bytes
// per parameter of weights, gradients and optimizer state from model_state_memory.h; a MoE
// model's routed experts are a second P with D = the expert data-parallel size, their gradients
// reduced and their states sharded over that group):
//   ZeRO 0   P·(w + g + o)
//   ZeRO 1   P·(w + g) + P·o/D        (Megatron's distributed optimizer: 6 + 12/D in bf16)
//   ZeRO 2   P·w + P·(g + o)/D
//   ZeRO 3   P·(w + g + o)/D, plus each stage's gathered weights while the schedule holds them
// Gradients are reduced in buckets of the plan's gradient_bucket_elements (absent: Megatron-LM's
// default max(40M, 1M·D)) at the gradient dtype — whole parameter units grouped as Strata's
// executor groups them (layout/gradient_buckets.h), an even split for the other stacks: an
// all-reduce for ZeRO 0, a reduce-scatter above it; ZeRO 1 and 2 all-gather the updated weights
// after the optimizer step.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/costmodels/activation_memory.h"
#include "strata/costmodels/layer_costs.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/plan.h"

namespace strata::costmodels {

struct StageCosts {
  PassCosts passes;                  // per micro-batch, the stage's layers plus embedding/head
  LayerActivationBytes activations;  // per micro-batch
  double parameters = 0;             // held by one rank (after tp sharding), experts included
  double expert_parameters = 0;      // of them, routed experts (after ep·etp sharding)
  double send_forward_s = 0;         // activation to the next stage
  double send_backward_s = 0;        // gradient to the previous stage
  std::vector<double> gradient_buckets_s;  // in the order the backward completes them
  double unshard_s = 0;                    // ZeRO-3: gathering the stage's weights
  double unshard_bytes = 0;                // what the gathered weights occupy
};

struct RankStateMemory {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  // The communicator's own temporaries at their largest (the cluster's
  // communicator_temporary_bytes_per_byte): data-parallel all-reduces issued during the backward
  // hold theirs until the step waits for them, on top of every activation buffer; a blocking
  // collective's last only while it runs. 0 on NCCL.
  double communicator_bytes = 0;
  double total() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + communicator_bytes;
  }
};

struct PlanCosts {
  std::vector<StageCosts> stages;            // pp·vpp virtual stages
  std::vector<RankStateMemory> rank_states;  // per pipeline rank
  std::vector<double> optimizer_step_s;      // per pipeline rank, incl. the weight all-gather
  double tied_embedding_grad_s = 0;
  double model_flops_per_step = 0;     // whole job, Megatron's count (MFU's numerator)
  double hardware_flops_per_step = 0;  // plus what recomputation runs again
  double capacity_bytes = 0;           // GPU memory less the cluster's reserve
  double dp_overlap_slowdown = 0;      // the GPU profile's compute slowdown under communication
};

// What one layer, the embedding and the LM head cost for a LayerContext (tp, cp, sequence
// parallelism, micro-batch, sequence, recompute, precision, tp and cp placement): the same for
// every plan that shares them, so the planner computes it once per distinct context.
struct LayerCostSet {
  PassCosts plain;       // a layer without recomputation
  PassCosts recomputed;  // a layer under the context's recompute granularity
  LayerActivationBytes plain_activations;
  LayerActivationBytes recomputed_activations;
  // The same for a mixture-of-experts layer (zero for a dense model).
  PassCosts moe_plain;
  PassCosts moe_recomputed;
  LayerActivationBytes moe_plain_activations;
  LayerActivationBytes moe_recomputed_activations;
  PassCosts embedding;
  PassCosts lm_head;
  LayerActivationBytes embedding_activations;
  LayerActivationBytes lm_head_activations;
  PassCosts mtp_input;  // zero without MTP (layer_costs.h: mtp_input_costs)
};
LayerCostSet layer_cost_set(const LayerContext& context);

// How much of PlanCosts to compute. step_bound: what the planner's lower bound on the step reads
// — every stage's passes and sends, each pipeline rank's optimizer step, the tied embedding's
// reduction — leaving the gradient buckets, ZeRO-3's gathers, model-state and communicator
// memory and the FLOP counts empty (the planner prices hundreds of thousands of candidates for
// their bound and simulates a few hundred, whose full costs the simulator computes).
enum class CostDetail { full, step_bound };

// `layers`, when given, must be layer_cost_set(layer_context(plan)); `placement`, when given,
// mesh_placement(plan.cluster, plan.mesh, plan.model) (mesh_placement.h).
PlanCosts plan_costs(const schemas::Plan& plan, const LayerCostSet* layers = nullptr,
                     CostDetail detail = CostDetail::full,
                     const MeshPlacement* placement = nullptr);

// Parameters of one virtual stage held by one rank. Norm scales (and LayerNorm biases), learned
// positions, latent attention's down projections and MoE routers are replicated across tp;
// everything else is split, a MoE layer's routed experts over ep·etp (`expert`, reduced over the
// expert data-parallel group). A tied LM head is the embedding itself when the stage holds
// both, else a copy kept in sync.
RankParameters stage_parameters(const schemas::ModelConfig& model, const ParameterBreakdown& counts,
                                const schemas::Mesh& mesh, const schemas::PipelineStage& stage);
// The MoE layers among `num_layers` layers from `first_layer` (0 for a dense model).
std::int64_t moe_layers_in(const schemas::ModelConfig& model, std::int64_t first_layer,
                           std::int64_t num_layers);

// Model states of `parameters` in `states` under a ZeRO stage with `shards` = dp·cp ranks sharing
// them, with gradients in `gradients` (model_state_dtypes).
RankStateMemory rank_state_memory(schemas::Dtype states, schemas::Dtype gradients,
                                  std::int64_t zero_stage, double shards, double parameters);

// What the plan's stack keeps its model states in (model_state_memory.h): its precision's, or
// fp32 where it trains fp32 parameters under torch.autocast.
ModelStateDtypes plan_model_state_dtypes(const schemas::Plan& plan);

// Bytes per parameter in which a plan accumulates and reduces its gradients: its gradient_dtype,
// by default fp32 for bf16 and fp8 (Megatron's main grads) and under torch.autocast, else the
// training dtype.
double gradient_bytes_per_parameter(const schemas::Plan& plan);

}  // namespace strata::costmodels
