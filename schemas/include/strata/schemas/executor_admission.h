// What Strata's executor runs, as one rule that both sides apply: `strata train` before it
// allocates anything (executor/train/trainer.h's check_plan_runs) and `strata plan` before it
// ranks a candidate for the strata framework (planner/plan_search.h). What the planner may emit
// for the executor is exactly what the executor admits, so a ranked plan is never refused.
//
// The rule is about the plan itself. What one backend has not built yet — the CPU trains in fp32
// only, the CUDA backend on one GPU without ZeRO — is a backend gap, checked by check_plan_runs
// against the device a job runs on, not part of what the planner may emit: a plan for 64 GPUs is
// a plan the executor is meant to run.
#pragma once

#include <optional>
#include <string>

#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"

namespace strata::schemas {

// Why the executor refuses a plan: the JSON pointer of the field and the rule it breaks, the two
// halves of an InputError.
struct ExecutorRefusal {
  std::string json_path;
  std::string rule;
};

// The first refusal for a model, nullopt when the executor builds it: today every model the format
// describes — every position embedding (learned, rotary, ALiBi, none), MLP activation, norm,
// embedding and query/key norm, (grouped-query) multi-head and latent attention, dense MLPs and
// mixtures of experts with any router. Paths are relative to the model object.
std::optional<ExecutorRefusal> executor_model_refusal(const ModelConfig& model);

// The first refusal for a plan, nullopt when the executor runs it: a plan for the strata framework
// (another framework's plan is for simulating that stack), tensor-parallel collectives between the
// GEMMs (no tp_comm_overlap), fp32 or bf16 with fp32 gradients, and a model
// executor_model_refusal admits (under "/model"). Every mesh, ZeRO stage, hybrid shard group,
// schedule, recomputation and pipeline split that validate_plan accepts runs, expert meshes
// included.
std::optional<ExecutorRefusal> executor_refusal(const Plan& plan);

}  // namespace strata::schemas
