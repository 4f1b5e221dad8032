// Builds a complete plan from its knobs (as `strata simulate` takes them on the command line, as
// validation rows describe published runs, as the planner enumerates them): micro-batch count
// from the fixed global batch, an even layer split over pp·vpp stages, then the plan's rules.
#pragma once

#include <cstdint>
#include <string>

#include "strata/schemas/plan.h"

namespace strata::schemas {

struct PlanKnobs {
  Mesh mesh;
  std::int64_t seq_length = 0;  // 0: the model's max_seq_length
  std::int64_t micro_batch_size = 1;
  std::int64_t global_batch_size = 1;
  bool sequence_parallel = false;
  std::int64_t zero_stage = 0;
  bool overlap_grad_reduce = true;
  std::optional<std::int64_t> gradient_bucket_elements;  // absent: Megatron's default
  bool tp_comm_overlap = false;
  TrainingFramework framework = TrainingFramework::strata;
  AttentionKernel attention = AttentionKernel::flash;
  ContextParallelComm cp_comm = ContextParallelComm::ring;
  RecomputeGranularity recompute = RecomputeGranularity::none;
  std::vector<RecomputeModule> recompute_modules;  // with selective; empty: core_attn
  ScheduleType schedule = ScheduleType::one_f_one_b;
  Dtype precision = Dtype::bf16;
  std::optional<Dtype> gradient_dtype;  // absent: the precision's default
  // The embedding and the LM head with its loss each count as a layer in the even layer split
  // (Megatron-LM's --account-for-embedding-in-pipeline-split, --account-for-loss-in-...).
  bool embedding_in_pipeline_split = false;
  bool loss_in_pipeline_split = false;
  bool ep_comm_overlap = false;
  std::optional<double> expert_load_imbalance;
  std::vector<CudaGraphScope> cuda_graph_scope;  // replayed from CUDA graphs; empty: none
};

// Errors name `source` (e.g. "command line") and the plan's JSON path of the offending knob.
Plan build_plan(const ModelConfig& model, const ClusterConfig& cluster, const PlanKnobs& knobs,
                const std::string& source);

}  // namespace strata::schemas
