#include "strata/schemas/executor_admission.h"

#include <fmt/format.h>

#include <tuple>

#include "strata/schemas/enum_names.h"

namespace strata::schemas {

std::optional<ExecutorRefusal> executor_model_refusal(const ModelConfig&) {
  // Every feature of the model format is built (on the CPU: the CUDA backend's gaps are
  // executor::cuda_model_refusal's). A feature added to the format and not yet to the executor
  // is refused here, by its field, until it is.
  return std::nullopt;
}

std::optional<ExecutorRefusal> executor_refusal(const Plan& plan) {
  if (plan.framework != TrainingFramework::strata) {
    return ExecutorRefusal{
        "/framework",
        fmt::format("\"{}\" is a plan for another training stack, for simulation only; strata "
                    "train runs plans whose framework is strata (remove the field)",
                    name_of(plan.framework, kTrainingFrameworkNames))};
  }
  if (plan.tp_comm_overlap) {
    return ExecutorRefusal{"/tp_comm_overlap",
                           "the executor runs tensor-parallel collectives between the GEMMs, not "
                           "pipelined with them: set it to false"};
  }
  if (plan.precision != Dtype::fp32 && plan.precision != Dtype::bf16) {
    return ExecutorRefusal{"/precision", fmt::format("the executor trains in fp32 or bf16, not {}",
                                                     name_of(plan.precision, kDtypeNames))};
  }
  if (gradient_dtype_of(plan) != Dtype::fp32) {
    return ExecutorRefusal{
        "/gradient_dtype",
        fmt::format("\"{}\": the executor accumulates and reduces gradients in fp32 (16-bit "
                    "gradients are for simulating stacks that reduce in them): remove the field",
                    name_of(gradient_dtype_of(plan), kDtypeNames))};
  }
  if (!plan.recompute.modules.empty()) {
    return ExecutorRefusal{"/recompute/modules",
                           "the executor recomputes whole layers (granularity \"full\"), not "
                           "Megatron-Core's modules: remove the field"};
  }
  if (std::optional<ExecutorRefusal> refusal = executor_model_refusal(plan.model)) {
    refusal->json_path = "/model" + refusal->json_path;
    return refusal;
  }
  // Mixture-of-experts models run on every mesh: the executor's MoE layer (executor/model/
  // moe_mlp.h) splits its routed experts over ep ranks of the tensor-, data- and context-parallel
  // group and each expert's width over etp ranks, routes each rank's own tokens (its
  // sequence-parallel shard under tp, its chunks under cp) and pools the load-balancing counts
  // over the ranks that split a micro-batch.
  return std::nullopt;
}

}  // namespace strata::schemas
