// Rows of published training runs (the format of ../shared/validation/README.md: model shape,
// machine, parallel configuration, measured iteration time), turned into Strata plans so the
// simulator's prediction can be set beside the measurement. `strata validate-sim` reads them.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "strata/schemas/plan.h"

namespace strata::simulator {

// The row's `software` object: which training stack ran it. overlap_grad_reduce sets the plan's
// (when absent: on for nemo, torchtitan and llm-foundry, off otherwise, as each stack defaults);
// tp_comm_overlap sets the plan's when the row has sequence parallelism (when absent: on for
// nemo, off otherwise). attention and framework set the plan's (when absent: flash, and
// Megatron-LM).
struct RunSoftware {
  // Absent: simulated as Megatron-LM (its behaviours are Strata's own;
  // costmodels/framework_behaviour.h).
  std::optional<schemas::TrainingFramework> framework;
  // Absent: flash, the norm since 2023.
  std::optional<schemas::AttentionKernel> attention;
  std::optional<bool> tp_comm_overlap;
  std::optional<bool> overlap_grad_reduce;
  // Mixture of experts: the token all-to-alls overlapped with another micro-batch's compute
  // (absent: off, Megatron-Core's default).
  std::optional<bool> ep_comm_overlap;
  // What gradients were accumulated and reduced in (absent: the precision's default, fp32 for
  // bf16 and fp8): Megatron-Bridge's performance recipes set grad_reduce_in_fp32 = false, bf16.
  std::optional<schemas::Dtype> gradient_dtype;
  // The recipe's CUDA graph scopes (absent: none).
  std::vector<schemas::CudaGraphScope> cuda_graph_scope;
};

struct PublishedRun {
  std::string id;
  std::string source;
  std::string tier;
  bool complete = false;
  std::optional<double> measured_step_time_s;
  RunSoftware software;
  std::optional<schemas::Plan> plan;  // absent for incomplete rows
};

// The machine a row names, as a cluster preset of its size with the row's inter-node bandwidth:
// a100-sxm4-80gb → dgx-a100-80gb, a100-sxm4-40gb → dgx-a100-40gb, h100-sxm5-80gb → dgx-h100,
// b200-sxm-180gb → dgx-b200, gb200-186gb → gb200-nvl72 (a "node" there is an NVL72 rack).
schemas::ClusterConfig published_run_cluster(const std::string& gpu, std::int64_t num_gpus,
                                             std::int64_t gpus_per_node,
                                             std::optional<double> inter_node_gbps_per_gpu,
                                             const schemas::JsonLocation& location);

// One JSON object per line; blank lines skipped. Each row is read as strictly as a plan: known
// keys only, types and ranges checked, null or absent meaning "the source does not say", and a
// complete row needing every field its simulation uses. Errors name the file, line and path.
std::vector<PublishedRun> read_published_runs(const std::filesystem::path& path);

}  // namespace strata::simulator
